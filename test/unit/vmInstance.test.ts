import { vmInstanceOf } from '../../lib/proxmox/vmInstance';

test("a VM's instance is the uuid of its smbios1, lower-cased, whatever else smbios1 holds", () => {
  expect(vmInstanceOf({ entries: { smbios1: 'uuid=8D3C3F0E-5B0A-4C1E-9A51-6F1F2B2A1C30' } })).toBe('8d3c3f0e-5b0a-4c1e-9a51-6f1f2b2a1c30');
  expect(vmInstanceOf({ entries: { smbios1: 'base64=1,manufacturer=UUVNVQ==,uuid=8d3c3f0e-5b0a-4c1e-9a51-6f1f2b2a1c30' } })).toBe('8d3c3f0e-5b0a-4c1e-9a51-6f1f2b2a1c30');
});

test('a VM without smbios1, or without a uuid in it, has no instance to bind a command to', () => {
  expect(vmInstanceOf({ entries: {} })).toBeUndefined();
  expect(vmInstanceOf({ entries: { smbios1: 'manufacturer=x' } })).toBeUndefined();
  expect(vmInstanceOf({ entries: { smbios1: 'uuid=8d3c3f0e-5b0a-4c1e-9a51-6f1f2b2a1c30x' } })).toBeUndefined();
});
