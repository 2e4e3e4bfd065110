import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * What a process guest keeps of its identity across boots, in its root as a real guest
 * keeps it on its disk: the instance cloud-init last ran for, and the machine-id. A clone
 * copies both (sandbox/cli/qm/clone.ts copies the guest's directory); a sealed template's
 * are emptied, which is what makes its clones new machines.
 */

/** Where cloud-init records the instance it ran for (cloudinit/helpers.py, data/instance-id). */
export const INSTANCE_ID_FILE = '/var/lib/cloud/data/instance-id';

/** Records `iid` as cloud-init's current instance; true when it was not the recorded one. */
export function recordInstance(root: string, iid: string): boolean {
  const file = path.join(root, INSTANCE_ID_FILE);
  let recorded: string | undefined;
  try {
    recorded = fs.readFileSync(file, 'utf8').trim();
  } catch {
    recorded = undefined;
  }
  if (recorded === iid) return false;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${iid}\n`);
  // cloud-init's per-instance directory, which `cloud-init clean` removes with the rest.
  fs.mkdirSync(path.join(root, 'var/lib/cloud/instances', iid), { recursive: true });
  return true;
}

/**
 * systemd at boot: an absent, empty or `uninitialized` /etc/machine-id is a first boot,
 * and systemd-machine-id-setup writes a new random ID. True when it did.
 */
export function bootMachineId(root: string): boolean {
  const file = path.join(root, 'etc/machine-id');
  let current = '';
  try {
    current = fs.readFileSync(file, 'utf8').trim();
  } catch {
    current = '';
  }
  if (/^[0-9a-f]{32}$/.test(current)) return false;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // Replaced, not written through: the file is read-only (0444), as systemd leaves it.
  fs.rmSync(file, { force: true });
  fs.writeFileSync(file, `${randomBytes(16).toString('hex')}\n`, { mode: 0o444 });
  return true;
}
