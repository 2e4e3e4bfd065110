import crypto from 'node:crypto';
import { adoptedDescription, installedDescription, specMarkerValue, verdict, withoutMarkers, type InstallSpec } from '../../contract';
import { MarkerSeal, sealedSpec, unmanagedReason } from '../../lib/vm/markerSeal';

/** Markers a Proxmox user can write (VM.Config.Options) against the ones QemuRun seals. */

const seal = new MarkerSeal(new Map([['k1', crypto.randomBytes(32)]]), 'k1');
const spec: InstallSpec = { os: 'debian', version: '12', vmid: 120, cores: 2, ramMb: 1024, diskGb: 20, user: 'debian' };
const markers = { owner: 'install-1', run: 'run-1', spec: specMarkerValue(spec) };
const sealed = installedDescription(markers, seal.seal({ vmid: 120, ...markers }));

test('sealed markers are trusted for their own VMID only, and give back their spec', () => {
  expect(seal.check(sealed, 120)).toEqual({ sealed: true, fields: { vmid: 120, ...markers } });
  expect(sealedSpec(seal.check(sealed, 120))).toEqual(spec);
  expect(seal.check(`operator's notes\n${sealed}`, 120).sealed).toBe(true);
  expect(seal.check(sealed, 121)).toMatchObject({ sealed: false, owner: 'install-1', reason: expect.stringMatching(/copied from another VM than 121/) });
});

test('a marker sealed before the cores had their name (`cpu`) still verifies, and reads back with `cores`', () => {
  // Written as earlier versions wrote it; the seal covers the marker's text, which stays as it is.
  const { cores, ...rest } = spec;
  const legacy = { owner: 'install-0', run: 'run-0', spec: Buffer.from(JSON.stringify({ ...rest, cpu: cores })).toString('base64url') };
  const description = installedDescription(legacy, seal.seal({ vmid: 120, ...legacy }));
  const check = seal.check(description, 120);
  expect(check).toEqual({ sealed: true, fields: { vmid: 120, ...legacy } });
  expect(sealedSpec(check)).toEqual(spec);
});

test('edited, unsealed, foreign-keyed and old markers are not trusted, and say why', () => {
  const bigger = sealed.replace(/^qemurun-spec=.*$/m, `qemurun-spec=${specMarkerValue({ ...spec, diskGb: 500 })}`);
  expect(seal.check(bigger, 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/do not match their seal/) });
  expect(seal.check(sealed.replace('qemurun-run=run-1', 'qemurun-run=run-2'), 120).sealed).toBe(false);
  expect(seal.check(sealed.replace(/^qemurun-seal=.*$/m, ''), 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/no seal/) });
  const other = new MarkerSeal(new Map([['k2', crypto.randomBytes(32)]]), 'k2');
  expect(other.check(sealed, 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/key "k1", which this QemuRun does not hold/) });
  expect(seal.check('qemurun-owner=install-1', 120)).toEqual({ sealed: false, owner: 'install-1', reason: expect.stringMatching(/before markers were sealed/) });
  expect(seal.check('just notes', 120)).toEqual({ sealed: false, reason: expect.any(String) });
});

test('the managed set is the sealed markers: an owner line alone is outside it, and says so', () => {
  expect(unmanagedReason(seal.check(sealed, 120))).toBeUndefined();
  expect(unmanagedReason(seal.check('just notes', 120))).toBe('its description has no qemurun-owner marker');
  expect(unmanagedReason(seal.check('qemurun-owner=install-1', 120))).toMatch(/^its qemurun-owner marker is not trusted: .*before markers were sealed/);
  expect(unmanagedReason(seal.check(sealed, 121))).toMatch(/^its qemurun-owner marker is not trusted: .*copied from another VM/);
});

test('an adoption over untrusted markers keeps the notes and replaces the markers with sealed ones', () => {
  const forged = `team B\n  qemurun-owner=install-9\nqemurun-spec=${specMarkerValue(spec)}\nqemurun-seal=k1:${'A'.repeat(43)}\nmore notes`;
  expect(withoutMarkers(forged)).toBe('team B\nmore notes');
  const adoption = { owner: 'adopted-vm-120-r1', at: '2026-12-02T00:00:00.000Z', workflowId: 'vm-120', runId: 'r1' };
  const adopted = adoptedDescription(withoutMarkers(forged), adoption, (f) => seal.seal(f), 120);
  expect(seal.check(adopted, 120)).toMatchObject({ sealed: true, fields: { owner: 'adopted-vm-120-r1', run: 'r1' } });
  expect(adopted).not.toMatch(/install-9|qemurun-spec/);
});

test('the reconciler keeps a VM with untrusted markers, or one created after its owner run closed', () => {
  const facts = { vmid: 120, node: 'pve1', owner: 'install-1', ownerState: 'TERMINATED' as const, ownerType: 'installVm', disabled: false, createdAtSec: 1000 };
  expect(verdict(facts, 2000).action).toBe('remove');
  expect(verdict({ ...facts, untrusted: 'its markers carry no seal' }, 2000)).toEqual({ action: 'keep', reason: 'its qemurun-owner marker is not trusted: its markers carry no seal' });
  expect(verdict({ ...facts, ownerClosedAtSec: 900 }, 2000)).toMatchObject({ action: 'keep', reason: expect.stringMatching(/closed before the VM was created/) });
  expect(verdict({ ...facts, ownerClosedAtSec: 1500 }, 2000).action).toBe('remove');
  // A template build that was terminated half-way left a VM as an install would; a finished one made a template to keep.
  expect(verdict({ ...facts, owner: 'template-debian-12', ownerType: 'buildTemplate' }, 2000).action).toBe('remove');
  expect(verdict({ ...facts, owner: 'template-debian-12', ownerType: 'buildTemplate', ownerState: 'COMPLETED' }, 2000).action).toBe('keep');
});
