import { dnsOptionsOf, net0Of } from '../../activities/vm';
import { qmCreate, qmSet } from '../../lib/proxmox/commands';
import { ApiNode } from '../../lib/proxmox/api/node';
import { PveApi } from '../../lib/proxmox/api/http';
import { startPveApiStub, type PveApiStub } from '../support/pveApiStub';

/**
 * An install's network fields as Proxmox gets them: net0's bridge, tag and mtu, and the
 * cloud-init `nameserver` / `searchdomain`, in `qm` argv (CLI mode) and in the API's
 * parameters (API mode). A spec without them gives what the seed gave.
 */

const TOKEN = 'qemurun@pve!test=8f6c2b9e-3d41-4a57-9b0e-5e2d6f1a7c33';

describe('net0 and DNS of a spec', () => {
  test('without the fields: the seed\'s net0 on VM_BRIDGE, and no DNS options', () => {
    expect(net0Of({}, 'vmbr0')).toBe('virtio,bridge=vmbr0');
    expect(dnsOptionsOf({})).toEqual({});
  });

  test('with them: the bridge, mtu and tag in net0, the servers space-separated', () => {
    expect(net0Of({ bridge: 'vmbr1', vlan: 42, mtu: 9000 }, 'vmbr0')).toBe('virtio,bridge=vmbr1,mtu=9000,tag=42');
    expect(net0Of({ vlan: 7 }, 'vmbr0')).toBe('virtio,bridge=vmbr0,tag=7');
    expect(dnsOptionsOf({ dns: { servers: ['192.0.2.53', '2001:db8::53'], search: 'lab.example' } })).toEqual({
      nameserver: '192.0.2.53 2001:db8::53',
      searchdomain: 'lab.example',
    });
    expect(dnsOptionsOf({ dns: { search: 'lab.example' } })).toEqual({ searchdomain: 'lab.example' });
  });

  test('in qm argv', () => {
    expect(qmCreate(120, { net0: net0Of({ bridge: 'vmbr1', vlan: 42, mtu: 9000 }, 'vmbr0') })).toEqual([
      'qm', 'create', '120', '--net0', 'virtio,bridge=vmbr1,mtu=9000,tag=42',
    ]);
    expect(qmSet(120, { ipconfig0: 'ip=10.0.0.120/24,gw=10.0.0.1', ...dnsOptionsOf({ dns: { servers: ['192.0.2.53', '192.0.2.54'], search: 'lab.example' } }) })).toEqual([
      'qm', 'set', '120', '--ipconfig0', 'ip=10.0.0.120/24,gw=10.0.0.1', '--nameserver', '192.0.2.53 192.0.2.54', '--searchdomain', 'lab.example',
    ]);
  });

  describe('in the API\'s parameters', () => {
    let stub: PveApiStub;
    let api: PveApi;
    beforeAll(async () => {
      stub = await startPveApiStub();
      api = new PveApi({ urls: [stub.url], token: TOKEN, fingerprint: stub.fingerprint });
      stub.route('POST /nodes/pve1/qemu', () => ({ data: null }));
      stub.route('PUT /nodes/pve1/qemu/120/config', () => ({ data: null }));
    });
    afterAll(async () => {
      api.close();
      await stub.close();
    });

    test('create carries net0, set carries nameserver and searchdomain', async () => {
      const node = new ApiNode(api, 'pve1', { pollMs: 10 });
      await node.createVm(120, { net0: net0Of({ bridge: 'vmbr1', vlan: 42, mtu: 9000 }, 'vmbr0') });
      await node.setVmOptions(120, dnsOptionsOf({ dns: { servers: ['192.0.2.53', '2001:db8::53'], search: 'lab.example' } }));
      const [create, set] = stub.requests.filter((r) => r.method !== 'GET');
      expect(create.form.get('net0')).toBe('virtio,bridge=vmbr1,mtu=9000,tag=42');
      expect(set.form.get('nameserver')).toBe('192.0.2.53 2001:db8::53');
      expect(set.form.get('searchdomain')).toBe('lab.example');
    });
  });
});
