import { findChecksum, parseChecksums } from '../../lib/images/checksums';

const H64 = 'a'.repeat(64);
const H128 = 'b'.repeat(128);

describe('checksum files', () => {
  test('GNU text mode (Debian SHA512SUMS, two spaces)', () => {
    const text = `${'c'.repeat(128)}  debian-12-genericcloud-amd64.qcow2\n${H128}  debian-12-generic-amd64.qcow2\n`;
    expect(findChecksum(text, 'debian-12-generic-amd64.qcow2')).toEqual({
      fileName: 'debian-12-generic-amd64.qcow2',
      hex: H128,
      algorithm: 'sha512',
    });
  });

  test('GNU binary mode (Ubuntu SHA256SUMS, `*`), exact name only', () => {
    const text = [
      `${'1'.repeat(64)} *ubuntu-24.04-server-cloudimg-amd64-disk-kvm.img`,
      `${H64} *ubuntu-24.04-server-cloudimg-amd64.img`,
      `${'2'.repeat(64)} *ubuntu-24.04-server-cloudimg-amd64.img.manifest`,
    ].join('\r\n');
    expect(findChecksum(text, 'ubuntu-24.04-server-cloudimg-amd64.img')?.hex).toBe(H64);
    expect(findChecksum(text, 'ubuntu-24.04-server-cloudimg-amd64')).toBeUndefined();
  });

  test('BSD tag (Rocky CHECKSUM) with comments and many near-identical names', () => {
    const text = [
      '# Rocky-9-GenericCloud-Base-9.5-20241118.0.x86_64.qcow2: 645988352 bytes',
      `SHA256 (Rocky-9-GenericCloud-Base-9.5-20241118.0.x86_64.qcow2) = ${'3'.repeat(64)}`,
      '# Rocky-9-GenericCloud-Base.latest.x86_64.qcow2: 645988352 bytes',
      'SHA256 (Rocky-9-GenericCloud-Base.latest.x86_64.qcow2) = 92c206cc6f790c61583247eefe87890f8828420662c17cacf247cec78ab4eec8',
      `SHA256 (Rocky-9-GenericCloud-LVM.latest.x86_64.qcow2) = ${'4'.repeat(64)}`,
    ].join('\n');
    expect(findChecksum(text, 'Rocky-9-GenericCloud-Base.latest.x86_64.qcow2')).toEqual({
      fileName: 'Rocky-9-GenericCloud-Base.latest.x86_64.qcow2',
      hex: '92c206cc6f790c61583247eefe87890f8828420662c17cacf247cec78ab4eec8',
      algorithm: 'sha256',
    });
    expect(parseChecksums(text)).toHaveLength(3);
  });

  test('upper-case hex, names with spaces, escaped names, junk lines', () => {
    const text = [
      `${H64.toUpperCase()}  my image.qcow2`,
      `\\${H64}  back\\\\slash.img`,
      'not a checksum line',
      `SHA1 (x.img) = ${'5'.repeat(40)}`,
    ].join('\n');
    expect(findChecksum(text, 'my image.qcow2')?.hex).toBe(H64);
    expect(findChecksum(text, 'back\\slash.img')?.hex).toBe(H64);
    expect(findChecksum(text, 'x.img')?.algorithm).toBeUndefined();
    expect(parseChecksums(text)).toHaveLength(3);
  });
});
