import crypto from 'node:crypto';
import {
  adoptedDescription,
  installedDescription,
  PENDING_INSTANCE,
  specMarkerValue,
  verdict,
  withInstanceSealed,
  withoutMarkers,
  type InstallSpec,
  type MarkerFields,
} from '../../contract';
import { MarkerSeal, sealedSpec, unmanagedReason } from '../../lib/vm/markerSeal';

/** Markers a Proxmox user can write (VM.Config.Options) against the ones QemuRun seals. */

const seal = new MarkerSeal(new Map([['k1', crypto.randomBytes(32)]]), 'k1');
const spec: InstallSpec = { os: 'debian', version: '12', vmid: 120, cores: 2, ramMb: 1024, diskGb: 20, user: 'debian' };
const UUID = '6f1c1f0e-9a57-4d5e-8f00-000000000120';
const LATER = '0b7d2a3c-1111-4222-8333-444444444444';
const markers = { instance: UUID, owner: 'install-1', run: 'run-1', spec: specMarkerValue(spec) };
const sealed = installedDescription(markers, seal.seal({ vmid: 120, ...markers }));
/** The VM config a check reads: the description and the smbios1 entry Proxmox keeps. */
const vm = (description: string, uuid = UUID): { description: string; entries: Record<string, string> } => ({ description, entries: { smbios1: `uuid=${uuid}` } });

test('sealed markers are trusted for their own VMID and VM instance only, and give back their spec', () => {
  expect(seal.check(vm(sealed), 120)).toEqual({ sealed: true, fields: { vmid: 120, ...markers } });
  expect(sealedSpec(seal.check(vm(sealed), 120))).toEqual(spec);
  expect(seal.check(vm(`operator's notes\n${sealed}`), 120).sealed).toBe(true);
  // Proxmox writes smbios1 with its own key order and case; the uuid is what counts.
  expect(seal.check({ description: sealed, entries: { smbios1: `base64=1,uuid=${UUID.toUpperCase()}` } }, 120).sealed).toBe(true);
  expect(seal.check(vm(sealed), 121)).toMatchObject({ sealed: false, owner: 'install-1', reason: expect.stringMatching(/copied from another VM than 121/) });
});

test('markers copied onto a later VM at the same VMID (another SMBIOS uuid) are refused, and say so', () => {
  expect(seal.check(vm(sealed, LATER), 120)).toEqual({
    sealed: false,
    owner: 'install-1',
    reason: `its markers were copied from another VM instance (sealed for SMBIOS uuid ${UUID}, this VM's is ${LATER})`,
  });
  expect(seal.check({ description: sealed, entries: {} }, 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/sealed for SMBIOS uuid .*, and this VM has none \(smbios1 was removed\)/) });
  expect(unmanagedReason(seal.check(vm(sealed, LATER), 120))).toMatch(/^its qemurun-owner marker is not trusted: its markers were copied from another VM instance/);
  // Naming the later VM's uuid in the instance line breaks the seal: the uuid is sealed, not read.
  expect(seal.check(vm(sealed.replace(UUID, LATER), LATER), 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/do not match their seal/) });
  // Dropping the instance line turns the markers into no valid markers of the older form either.
  const stripped = sealed.replace(/^qemurun-instance=.*\n/m, '');
  const lenient = new MarkerSeal(new Map([['k1', Buffer.alloc(32)]]), 'k1', () => true);
  expect(seal.check(vm(stripped, LATER), 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/do not match their seal/) });
  expect(lenient.check(vm(stripped, LATER), 120).sealed).toBe(false);
});

test("a clone's markers sealed before its uuid was known count only for the run that wrote them", () => {
  const pending = { ...markers, instance: PENDING_INSTANCE };
  const text = installedDescription(pending, seal.seal({ vmid: 120, ...pending }));
  expect(seal.check(vm(text), 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/before its VM instance was known/) });
  expect(seal.check(vm(text), 120, { acceptPending: true })).toEqual({ sealed: true, fields: { vmid: 120, ...pending } });
});

test('markers of the form without the instance count until the VMs were resealed, and the reseal binds them to the uuid', () => {
  let resealed = false;
  const keys = new Map([['k1', crypto.randomBytes(32)]]);
  const upgrading = new MarkerSeal(keys, 'k1', () => !resealed);
  const old = { owner: 'install-0', run: 'run-0', spec: specMarkerValue(spec) };
  const oldText = `notes before\n${installedDescription(old, upgrading.seal({ vmid: 120, ...old }), 'notes after')}`;
  const check = upgrading.check(vm(oldText, LATER), 120);
  expect(check).toEqual({ sealed: true, fields: { vmid: 120, ...old } });
  const fields = (check as { fields: MarkerFields }).fields;
  const again = withInstanceSealed(oldText, UUID, upgrading.seal({ ...fields, instance: UUID }));
  expect(again.split('\n')[0]).toBe('notes before');
  expect(again.split('\n').at(-1)).toBe('notes after');
  expect(upgrading.check(vm(again), 120)).toEqual({ sealed: true, fields: { vmid: 120, instance: UUID, ...old } });
  resealed = true;
  expect(upgrading.check(vm(again), 120).sealed).toBe(true);
  expect(upgrading.check(vm(again, LATER), 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/another VM instance/) });
  expect(upgrading.check(vm(oldText), 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/form without the VM instance, which this QemuRun refuses since it resealed its VMs/) });
  expect(unmanagedReason(upgrading.check(vm(oldText), 120))).toMatch(/not trusted/);
});

test('a marker sealed before the cores had their name (`cpu`) still verifies, and reads back with `cores`', () => {
  // Written as earlier versions wrote it; the seal covers the marker's text, which stays as it is.
  const { cores, ...rest } = spec;
  const legacy = { instance: UUID, owner: 'install-0', run: 'run-0', spec: Buffer.from(JSON.stringify({ ...rest, cpu: cores })).toString('base64url') };
  const description = installedDescription(legacy, seal.seal({ vmid: 120, ...legacy }));
  const check = seal.check(vm(description), 120);
  expect(check).toEqual({ sealed: true, fields: { vmid: 120, ...legacy } });
  expect(sealedSpec(check)).toEqual(spec);
});

test('edited, unsealed, foreign-keyed and old markers are not trusted, and say why', () => {
  const bigger = sealed.replace(/^qemurun-spec=.*$/m, `qemurun-spec=${specMarkerValue({ ...spec, diskGb: 500 })}`);
  expect(seal.check(vm(bigger), 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/do not match their seal/) });
  expect(seal.check(vm(sealed.replace('qemurun-run=run-1', 'qemurun-run=run-2')), 120).sealed).toBe(false);
  expect(seal.check(vm(sealed.replace(/^qemurun-seal=.*$/m, '')), 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/no seal/) });
  const other = new MarkerSeal(new Map([['k2', crypto.randomBytes(32)]]), 'k2');
  expect(other.check(vm(sealed), 120)).toMatchObject({ sealed: false, reason: expect.stringMatching(/key "k1", which this QemuRun does not hold/) });
  expect(seal.check(vm('qemurun-owner=install-1'), 120)).toEqual({ sealed: false, owner: 'install-1', reason: expect.stringMatching(/before markers were sealed/) });
  expect(seal.check(vm('just notes'), 120)).toEqual({ sealed: false, reason: expect.any(String) });
});

test('the managed set is the sealed markers: an owner line alone is outside it, and says so', () => {
  expect(unmanagedReason(seal.check(vm(sealed), 120))).toBeUndefined();
  expect(unmanagedReason(seal.check(vm('just notes'), 120))).toBe('its description has no qemurun-owner marker');
  expect(unmanagedReason(seal.check(vm('qemurun-owner=install-1'), 120))).toMatch(/^its qemurun-owner marker is not trusted: .*before markers were sealed/);
  expect(unmanagedReason(seal.check(vm(sealed), 121))).toMatch(/^its qemurun-owner marker is not trusted: .*copied from another VM/);
});

test('an adoption over untrusted markers keeps the notes and replaces the markers with sealed ones', () => {
  const forged = `team B\n  qemurun-owner=install-9\nqemurun-spec=${specMarkerValue(spec)}\nqemurun-seal=k1:${'A'.repeat(43)}\nmore notes`;
  expect(withoutMarkers(forged)).toBe('team B\nmore notes');
  const adoption = { owner: 'adopted-vm-120-r1', at: '2026-12-02T00:00:00.000Z', workflowId: 'vm-120', runId: 'r1' };
  const adopted = adoptedDescription(withoutMarkers(forged), adoption, (f) => seal.seal(f), { vmid: 120, instance: UUID });
  expect(seal.check(vm(adopted), 120)).toMatchObject({ sealed: true, fields: { owner: 'adopted-vm-120-r1', run: 'r1' } });
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
