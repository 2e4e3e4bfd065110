import { createHash } from 'node:crypto';

/**
 * How cloud.debian.org, cloud-images.ubuntu.com and dl.rockylinux.org lay out their images
 * and checksum files. Written out here rather than taken from lib/images/catalog, so that
 * a wrong catalog fails against the mirror instead of agreeing with it.
 */

export interface MirrorImage {
  os: OsName;
  version: string;
  fileName: string;
  /** URL path, e.g. /ubuntu/24.04/release/ubuntu-24.04-server-cloudimg-amd64.img */
  path: string;
  url: string;
  checksumPath: string;
  /** The stand-in image's bytes; empty for a real image, which is served from `file`. */
  content: Buffer;
  /** A real image (SANDBOX_GUESTS=qemu), served from disk. */
  file?: string;
  size: number;
  sha256: string;
  sha512: string;
  etag: string;
}

/** The distributions whose upstream layout the mirror copies (the service's `os` names). */
export type OsName = 'debian' | 'ubuntu' | 'rockylinux';

/**
 * The versions the mirror serves unless told which (`versions` of startImageMirror: the
 * service's sandbox mode passes the ones it offers, so the two cannot drift apart).
 */
export const MIRROR_VERSIONS: Readonly<Record<OsName, readonly string[]>> = {
  debian: ['11', '12', '13'],
  ubuntu: ['20.04', '22.04', '24.04'],
  rockylinux: ['8', '9', '10'],
};

const DEBIAN_CODENAMES: Record<string, string> = { '11': 'bullseye', '12': 'bookworm', '13': 'trixie' };

/** First path segment of each distribution on the mirror; the IMAGE_BASE_* point here. */
export const PREFIX: Record<OsName, string> = { debian: '/debian', ubuntu: '/ubuntu', rockylinux: '/rocky' };

/** Directory (URL path), image file name and checksum file name, as upstream has them. */
export function layout(os: OsName, version: string): { dir: string; fileName: string; checksumFile: string } {
  switch (os) {
    case 'debian':
      return { dir: `/debian/${DEBIAN_CODENAMES[version]}/latest`, fileName: `debian-${version}-generic-amd64.qcow2`, checksumFile: 'SHA512SUMS' };
    case 'ubuntu':
      return { dir: `/ubuntu/${version}/release`, fileName: `ubuntu-${version}-server-cloudimg-amd64.img`, checksumFile: 'SHA256SUMS' };
    case 'rockylinux':
      return { dir: `/rocky/${version}/images/x86_64`, fileName: `Rocky-${version}-GenericCloud-Base.latest.x86_64.qcow2`, checksumFile: 'CHECKSUM' };
  }
}

export function describeImage(os: OsName, version: string, content: Buffer, origin: string): MirrorImage {
  const { dir, fileName, checksumFile } = layout(os, version);
  const sha256 = createHash('sha256').update(content).digest('hex');
  return {
    os, version, fileName, content, sha256, size: content.length,
    sha512: createHash('sha512').update(content).digest('hex'),
    path: `${dir}/${fileName}`,
    url: `${origin}${dir}/${fileName}`,
    checksumPath: `${dir}/${checksumFile}`,
    etag: `"${sha256.slice(0, 16)}"`,
  };
}

/**
 * A real image built on this machine (scripts/build-guest-image.sh), in the same place
 * upstream has it. Only Debian's are built: the archives of the others are not reachable
 * from here. Its SHA512SUMS line comes from the build; no SHA-256 is published for it.
 */
export function describeImageFile(os: OsName, version: string, file: string, sha512: string, size: number, origin: string): MirrorImage {
  const { dir, fileName, checksumFile } = layout(os, version);
  return {
    os, version, fileName, file, size, sha512,
    content: Buffer.alloc(0),
    sha256: '',
    path: `${dir}/${fileName}`,
    url: `${origin}${dir}/${fileName}`,
    checksumPath: `${dir}/${checksumFile}`,
    etag: `"${sha512.slice(0, 16)}"`,
  };
}

/**
 * The directory's checksum file in the distribution's own format, with entries for the
 * neighbouring files that must not be mistaken for the image's.
 */
export function checksumFile(img: MirrorImage): string {
  const fake = (name: string, algo: 'sha256' | 'sha512') => createHash(algo).update(name).digest('hex');
  const v = img.version;
  switch (img.os) {
    case 'debian': {
      const others = [`debian-${v}-genericcloud-amd64.qcow2`, `debian-${v}-generic-amd64.raw`, `debian-${v}-generic-amd64.json`];
      return [...others.map((n) => `${fake(n, 'sha512')}  ${n}`), `${img.sha512}  ${img.fileName}`].join('\n') + '\n';
    }
    case 'ubuntu': {
      const others = [`ubuntu-${v}-server-cloudimg-amd64-disk-kvm.img`, `ubuntu-${v}-server-cloudimg-amd64.tar.gz`, `ubuntu-${v}-server-cloudimg-arm64.img`];
      return [...others.map((n) => `${fake(n, 'sha256')} *${n}`), `${img.sha256} *${img.fileName}`].join('\n') + '\n';
    }
    case 'rockylinux': {
      const others = [
        `Rocky-${v}-GenericCloud-Base-${v}.5-20241118.0.x86_64.qcow2`,
        `Rocky-${v}-GenericCloud-LVM.latest.x86_64.qcow2`,
        `Rocky-${v}-EC2-Base.latest.x86_64.qcow2`,
        `Rocky-${v}-GenericCloud.latest.x86_64.qcow2`,
      ];
      return others.map((n) => rockyEntry(n, fake(n, 'sha256'), 645988352)).join('') + rockyEntry(img.fileName, img.sha256, img.size);
    }
  }
}

/** Rocky also publishes a checksum file per image, `<image>.CHECKSUM`. */
export function perImageChecksumPath(img: MirrorImage): string | undefined {
  return img.os === 'rockylinux' ? `${img.path}.CHECKSUM` : undefined;
}

export function perImageChecksum(img: MirrorImage): string {
  return rockyEntry(img.fileName, img.sha256, img.size);
}

function rockyEntry(name: string, hex: string, size: number): string {
  return `# ${name}: ${size} bytes\nSHA256 (${name}) = ${hex}\n`;
}
