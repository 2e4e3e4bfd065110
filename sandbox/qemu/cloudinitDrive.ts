import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { VmConf } from '../state/vmconf';
import { nocloudFiles, type CustomCloudinitFiles } from '../state/cloudinit';
import { GUEST_RESOLV, guestIpconfig, nodeResolv } from './network';

/**
 * Writes a real guest's cloud-init drive at `qm start`, as qemu-server's
 * `generate_cloudinit_config` → `generate_nocloud` → `commit_cloudinit_disk` do: the four
 * NoCloud files in a directory, `genisoimage -quiet -iso-level 3 -J -R -V cidata`, and the
 * ISO copied into the cloud-init volume. Proxmox pipes the ISO into its own `qemu-img dd`
 * (which reads stdin, a Proxmox patch); Debian's cannot, so the ISO is padded to the
 * volume's size and converted into it: the guest reads the same bytes.
 *
 * The files are qemu-server's except for the network (./network.ts): a loopback address
 * becomes the guest's user-network address, and the resolver slirp's, unless the VM sets
 * `nameserver` itself.
 */
export function writeCloudinitDrive(
  conf: VmConf,
  vmid: number,
  volume: { file: string; format: string; sizeBytes: number },
  custom: CustomCloudinitFiles = {},
): Record<string, string> {
  const resolv = conf.props.nameserver !== undefined ? nodeResolv() : GUEST_RESOLV;
  const files = nocloudFiles(conf, vmid, resolv, guestIpconfig, custom);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), `qemurun-cloudinit-${vmid}-`));
  try {
    const content = path.join(work, 'cidata');
    fs.mkdirSync(content);
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(content, name), text);
    const iso = path.join(work, 'cloudinit.iso');
    execFileSync('genisoimage', ['-quiet', '-iso-level', '3', '-J', '-R', '-V', 'cidata', '-o', iso, content], { stdio: ['ignore', 'ignore', 'pipe'] });
    if (fs.statSync(iso).size > volume.sizeBytes) throw new Error(`cloud-init ISO larger than its ${volume.sizeBytes}-byte volume`);
    fs.truncateSync(iso, volume.sizeBytes);
    fs.mkdirSync(path.dirname(volume.file), { recursive: true });
    const tmp = `${volume.file}.part-${process.pid}`;
    execFileSync('qemu-img', ['convert', '-f', 'raw', '-O', volume.format, iso, tmp], { stdio: ['ignore', 'ignore', 'pipe'] });
    fs.renameSync(tmp, volume.file);
    return files;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}
