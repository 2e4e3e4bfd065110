import path from 'node:path';
import { spawn } from 'node:child_process';
import { sandboxSourceDir } from '../location';

/**
 * qemu-server's qmeventd: when a VM that was asked to reboot has stopped, `qm cleanup`
 * starts it again as a task of its own (`src/qmeventd/qmeventd.c` → `PVE/CLI/qm.pm`,
 * `cleanup`, which sees the reboot request `vm_reboot` left). So `qm reboot` returns once
 * the guest is down, and the VM comes back a moment later: run as
 * `node tsrun.js cli/qmeventdMain.ts <dir> <node> <vmid>`, detached from the reboot.
 */
export function restartAfterReboot(dir: string, node: string, vmid: number): void {
  const src = sandboxSourceDir();
  const child = spawn(process.execPath, [path.join(src, 'tsrun.js'), path.join(src, 'cli', 'qmeventdMain.ts'), dir, node, String(vmid)], {
    detached: true,
    stdio: 'ignore',
    cwd: '/',
    env: { ...process.env, PVE_SANDBOX_DIR: dir, PVE_SANDBOX_NODE: node },
  });
  child.unref();
}
