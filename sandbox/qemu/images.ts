import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { SandboxSetupError } from '../setupError';
import type { RealImage } from '../mirror/server';
import { sandboxSourceDir } from '../location';
import { kvmWorks } from './accel';

/** The images, and the accelerator the guests booting them can use here. */
export interface GuestImages {
  files: RealImage[];
  accel: 'kvm' | 'tcg';
}

/** Builds (or finds) the images and probes KVM with the first of them. */
export async function prepareRealGuests(versions: string[], log: (line: string) => void): Promise<GuestImages> {
  const files = await ensureGuestImages(versions, log);
  const accel = files.length && (await kvmWorks(files[0].file)) ? 'kvm' : 'tcg';
  if (accel === 'tcg') log('Real guests run under TCG (software emulation): this machine has no KVM that boots them.');
  return { files, accel };
}

/**
 * The real Debian cloud images the built-in mirror serves to real guests: built on this
 * machine from Debian's archive by scripts/build-guest-image.sh, once, and cached outside
 * the checkout (keyed by the script's recipe), so only a first start or a changed recipe
 * waits for a build (a few minutes per version).
 */
async function ensureGuestImages(versions: string[], log: (line: string) => void): Promise<RealImage[]> {
  const script = path.resolve(sandboxSourceDir(), '..', 'scripts', 'build-guest-image.sh');
  const images: RealImage[] = [];
  for (const version of versions) {
    const file = await build(script, version, log);
    const sums = fs.readFileSync(path.join(path.dirname(file), 'SHA512SUMS'), 'utf8');
    const sha512 = sums
      .split('\n')
      .map((l) => /^([0-9a-f]{128})\s+\*?(.+)$/.exec(l.trim()))
      .find((m) => m?.[2] === path.basename(file))?.[1];
    if (!sha512) throw new SandboxSetupError(`${path.dirname(file)}/SHA512SUMS lists no ${path.basename(file)}: delete that directory and start again.`);
    images.push({ os: 'debian', version, file, sha512 });
  }
  return images;
}

function build(script: string, version: string, log: (line: string) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [script, version], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let announced = false;
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => {
      err += b.toString();
      if (!announced) {
        announced = true;
        log(`Building the real Debian ${version} cloud image for SANDBOX_GUESTS=qemu (once; a few minutes)...`);
      }
    });
    child.on('error', (e) => reject(new SandboxSetupError(`cannot run ${script}: ${e.message}`)));
    child.on('exit', (code) => {
      const file = out.trim().split('\n').at(-1) ?? '';
      if (code === 0 && path.isAbsolute(file) && fs.existsSync(file)) return resolve(file);
      const last = err.trim().split('\n').filter(Boolean).at(-1) ?? `exit ${code}`;
      reject(new SandboxSetupError(`SANDBOX_GUESTS=qemu: building the Debian ${version} image failed: ${last}`));
    });
  });
}
