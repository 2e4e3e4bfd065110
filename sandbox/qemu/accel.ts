import { spawn } from 'node:child_process';
import fs from 'node:fs';

/**
 * Whether this machine's KVM runs a real guest, found by booting one: some hosts have a
 * `/dev/kvm` that opens and creates VMs but stops a stock kernel ("KVM internal error …
 * emulation failure" from a paravirtual KVM, or QEMU aborting on a model-specific
 * register it cannot set), and a firmware or boot loader alone may still run there. So
 * the probe boots `image` (a throw-away snapshot) with the settings real guests get
 * (`-accel kvm -cpu host`) and waits for its kernel to start init. Seen in time, KVM
 * works; anything else and real guests run under TCG (software emulation, several times
 * slower, but the same guest).
 */
export async function kvmWorks(image: string, timeoutMs = 30_000): Promise<boolean> {
  try {
    fs.accessSync('/dev/kvm', fs.constants.R_OK | fs.constants.W_OK);
  } catch {
    return false;
  }
  return new Promise<boolean>((resolve) => {
    const child = spawn(
      'qemu-system-x86_64',
      ['-accel', 'kvm', '-cpu', 'host', '-m', '512', '-nodefaults', '-display', 'none', '-no-reboot', '-snapshot', '-serial', 'stdio', '-drive', `file=${image},if=virtio`],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const timer = setTimeout(() => finish(false), timeoutMs);
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString('latin1');
      if (/Run \/\S*init as init process/.test(out)) finish(true);
    });
    child.stderr.on('data', (b: Buffer) => {
      if (/internal error|emulation failure|failed to set MSR/i.test(b.toString())) finish(false);
    });
    child.on('error', () => finish(false));
    child.on('exit', () => finish(false));
    let done = false;
    function finish(ok: boolean) {
      if (done) return;
      done = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      resolve(ok);
    }
  });
}
