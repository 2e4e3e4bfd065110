import { OS_VERSIONS, type OsName } from '../../contract';
import { ImageNotFoundError } from './errors';

/**
 * Where each supported OS publishes its official amd64 cloud image and the checksum file
 * beside it (SPEC install step 2, reference §11). Bases come from config (`imageBase`) so
 * tests and operators with a local mirror can point elsewhere; the layout below the base
 * is the upstream one and is not configurable.
 */

export type ChecksumAlgorithm = 'sha256' | 'sha512';

/** Base URL per OS, e.g. config.imageBase. Trailing slashes are ignored. */
export type ImageBases = Record<OsName, string>;

export interface ImageSource {
  url: string;
  /** Last path segment of `url`; also the name the checksum file lists and the cache uses. */
  fileName: string;
  checksumUrl: string;
  /** What the checksum file publishes (Debian SHA512SUMS, others SHA-256). */
  algorithm: ChecksumAlgorithm;
}

const DEBIAN_CODENAMES: Record<string, string> = { '11': 'bullseye', '12': 'bookworm', '13': 'trixie' };

export function isSupported(os: string, version: string): os is OsName {
  return Object.hasOwn(OS_VERSIONS, os) && (OS_VERSIONS[os as OsName] as readonly string[]).includes(version);
}

export function imageFor(os: OsName, version: string, bases: ImageBases): ImageSource {
  if (!isSupported(os, version)) {
    throw new ImageNotFoundError(`no official cloud image for ${os} ${version}`);
  }
  const base = bases[os].replace(/\/+$/, '');
  switch (os) {
    case 'debian': {
      // `latest/` is a moving pointer to the newest dated build; SHA512SUMS moves with it.
      const dir = `${base}/${DEBIAN_CODENAMES[version]}/latest`;
      return source(dir, `debian-${version}-generic-amd64.qcow2`, 'SHA512SUMS', 'sha512');
    }
    case 'ubuntu': {
      // The versioned "releases" tree the seed used; the `.img` is qcow2 despite its name.
      const dir = `${base}/${version}/release`;
      return source(dir, `ubuntu-${version}-server-cloudimg-amd64.img`, 'SHA256SUMS', 'sha256');
    }
    case 'rockylinux': {
      // CHECKSUM lists every image of the directory (EC2, LVM, dated names): callers must
      // match the exact file name.
      const dir = `${base}/${version}/images/x86_64`;
      return source(dir, `Rocky-${version}-GenericCloud-Base.latest.x86_64.qcow2`, 'CHECKSUM', 'sha256');
    }
  }
}

function source(dir: string, fileName: string, checksumFile: string, algorithm: ChecksumAlgorithm): ImageSource {
  return { url: `${dir}/${fileName}`, fileName, checksumUrl: `${dir}/${checksumFile}`, algorithm };
}
