import fs from 'node:fs';
import { makeCtx } from './context';
import { startVm } from './qm/power';

/** The start qmeventd makes after a reboot (./qmeventd.ts): `<dir> <node> <vmid>`. */
const [dir, node, vmid] = process.argv.slice(2);
try {
  // A VM destroyed or started by someone else meanwhile stays as it is, as with qmeventd.
  if (fs.existsSync(dir)) startVm(makeCtx(dir, node, { out: () => {}, err: () => {} }), Number(vmid));
} catch {
  // qmeventd logs to the journal; nobody waits for this start.
}
process.exit(0);
