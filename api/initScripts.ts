import { z } from 'zod';
import { initScriptFor, listInitScripts } from '../lib/initScripts';
import { HttpError } from './errors';
import { err } from './openapi/answer';
import { defineRoutes } from './route';

/**
 * The OS init scripts at /sh/<os>_<version>.sh, as the seed served them. Installs deliver
 * the script over the SSH session instead (the VM need not reach the API); this is for
 * operators who want to read or run one by hand. Settings and the root password are not
 * in the text: they are environment variables (QEMURUN_*) the caller sets.
 */
export const initScriptRoutes = defineRoutes({
  stage: 'late',
  at: '/',
  setup: () => ({ byFile: new Map(listInitScripts().map((s) => [s.file, s])) }),
  routes: [
    {
      method: 'GET',
      path: '/sh/:file',
      summary: "An OS's init script, as the seed served it",
      answers: { 200: { description: 'the script', text: z.string() }, 404: err('no such script') },
      handle: ({ byFile }, req, res) => {
        const script = byFile.get(String(req.params.file));
        if (!script) throw new HttpError(404, `no init script ${req.params.file}; there are ${[...byFile.keys()].join(', ')}`);
        res.type('text/x-shellscript; charset=utf-8').send(initScriptFor(script.os, script.version));
      },
    },
  ],
});
