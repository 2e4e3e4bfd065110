import fs from 'node:fs';
import { makeCtx } from './context';
import { startVm } from './qm/power';
import { CliError } from './errors';
import { clusterPaths } from '../state/paths';

/**
 * The start qmeventd makes after a reboot (./qmeventd.ts): `<dir> <node> <vmid>`. Like
 * qmeventd's it reports to a log (the guest's console file) and to nobody waiting.
 */
const [dir, node, vmidArg] = process.argv.slice(2);
const vmid = Number(vmidArg);
const note = (line: string) => {
  try {
    fs.appendFileSync(clusterPaths(dir).guestConsole(vmid), `qmeventd: ${line}\n`);
  } catch {
    // the guest's directory is gone with the VM
  }
};

for (let attempt = 1; fs.existsSync(dir); attempt++) {
  try {
    startVm(makeCtx(dir, node, { out: () => {}, err: () => {} }), vmid);
    break;
  } catch (e) {
    const text = e instanceof CliError ? e.message : String((e as Error).stack ?? e);
    // Another call holding the config lock a moment longer is no reason to leave it down.
    if (attempt < 5 && /got timeout/.test(text)) continue;
    // A VM destroyed or started by someone else meanwhile stays as it is, as with qmeventd.
    note(`start after reboot failed: ${text}`);
    break;
  }
}
process.exit(0);
