import { imageFor, isSupported } from '../../lib/images/catalog';
import { ImageNotFoundError } from '../../lib/images/errors';
import { loadConfig } from '../../lib/config';

// The default bases must produce exactly the distributions' own upstream URLs.
const bases = loadConfig({}).imageBase;

describe('imageFor', () => {
  test.each([
    ['debian', '11', 'https://cloud.debian.org/images/cloud/bullseye/latest/debian-11-generic-amd64.qcow2', 'SHA512SUMS', 'sha512'],
    ['debian', '12', 'https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-generic-amd64.qcow2', 'SHA512SUMS', 'sha512'],
    ['debian', '13', 'https://cloud.debian.org/images/cloud/trixie/latest/debian-13-generic-amd64.qcow2', 'SHA512SUMS', 'sha512'],
    ['ubuntu', '20.04', 'https://cloud-images.ubuntu.com/releases/20.04/release/ubuntu-20.04-server-cloudimg-amd64.img', 'SHA256SUMS', 'sha256'],
    ['ubuntu', '22.04', 'https://cloud-images.ubuntu.com/releases/22.04/release/ubuntu-22.04-server-cloudimg-amd64.img', 'SHA256SUMS', 'sha256'],
    ['ubuntu', '24.04', 'https://cloud-images.ubuntu.com/releases/24.04/release/ubuntu-24.04-server-cloudimg-amd64.img', 'SHA256SUMS', 'sha256'],
    ['rockylinux', '8', 'https://dl.rockylinux.org/pub/rocky/8/images/x86_64/Rocky-8-GenericCloud-Base.latest.x86_64.qcow2', 'CHECKSUM', 'sha256'],
    ['rockylinux', '9', 'https://dl.rockylinux.org/pub/rocky/9/images/x86_64/Rocky-9-GenericCloud-Base.latest.x86_64.qcow2', 'CHECKSUM', 'sha256'],
    ['rockylinux', '10', 'https://dl.rockylinux.org/pub/rocky/10/images/x86_64/Rocky-10-GenericCloud-Base.latest.x86_64.qcow2', 'CHECKSUM', 'sha256'],
  ] as const)('%s %s', (os, version, url, checksumFile, algorithm) => {
    const src = imageFor(os, version, bases);
    expect(src.url).toBe(url);
    expect(src.fileName).toBe(url.slice(url.lastIndexOf('/') + 1));
    expect(src.checksumUrl).toBe(url.slice(0, url.lastIndexOf('/') + 1) + checksumFile);
    expect(src.algorithm).toBe(algorithm);
  });

  test('a configured base replaces the host part, trailing slash or not', () => {
    const src = imageFor('debian', '12', { ...bases, debian: 'http://mirror.lan/debian-cloud/' });
    expect(src.url).toBe('http://mirror.lan/debian-cloud/bookworm/latest/debian-12-generic-amd64.qcow2');
  });

  test('an unsupported version is a non-retryable ImageNotFoundError', () => {
    expect(() => imageFor('debian', '10', bases)).toThrow(ImageNotFoundError);
    expect(() => imageFor('ubuntu', '24.10', bases)).toThrow(/no official cloud image/);
    expect(isSupported('fedora', '40')).toBe(false);
    expect(isSupported('toString', '1')).toBe(false);
  });
});
