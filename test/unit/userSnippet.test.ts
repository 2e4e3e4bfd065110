import { ApplicationFailure } from '@temporalio/common';
import { parse } from 'yaml';
import { applyUserSnippet, carryUserSnippet } from '../../activities/userSnippet';
import type { Config } from '../../lib/config';
import type { ProxmoxCluster, ProxmoxNode } from '../../lib/proxmox';
import type { InstallSpec } from '../../contract';

/** A node that keeps snippets and options in memory, and records what was asked of it. */
function fakeNode(name: string, opts: { snippets?: boolean; cicustom?: string } = {}) {
  const files = new Map<string, string>();
  const calls: string[] = [];
  const entries: Record<string, string> = opts.cicustom ? { cicustom: opts.cicustom } : {};
  const node = {
    node: name,
    storageStatus: async () => (opts.snippets === false ? [] : [{ name: 'local' }]),
    setVmOptions: async (_vmid: number, o: Record<string, unknown>) => {
      calls.push(`set ${JSON.stringify(o)}`);
      Object.assign(entries, o);
    },
    writeSnippet: async (volid: string, text: string) => {
      calls.push(`write ${volid}`);
      files.set(volid, text);
    },
    readSnippet: async (volid: string) => files.get(volid),
    config: async () => ({ entries }),
  } as unknown as ProxmoxNode;
  return { node, files, calls };
}

const config = { snippetsStorage: 'local' } as Config;
const spec = { os: 'debian', version: '12', cores: 1, ramMb: 512, diskGb: 16, user: 'debian' } as InstallSpec;

test('the option is set before the file is written, and the file holds the merged user-data', async () => {
  const n = fakeNode('pve1');
  await applyUserSnippet(config, n.node, { vmid: 150, spec, userData: '#cloud-config\nruncmd: [ls]\n', keys: ['ssh-ed25519 AAAA k'], passwd: 'pw', hostname: 'vm-150' });
  expect(n.calls).toEqual([`set {"cicustom":"user=local:snippets/qemurun-150-user.yaml"}`, 'write local:snippets/qemurun-150-user.yaml']);
  const doc = parse(n.files.get('local:snippets/qemurun-150-user.yaml')!) as Record<string, unknown>;
  expect(doc).toMatchObject({ hostname: 'vm-150', user: 'debian', ssh_authorized_keys: ['ssh-ed25519 AAAA k'], runcmd: ['ls'] });
  // The password as Proxmox would have written it: its SHA-256 crypt hash, never the password.
  expect(doc.password).toMatch(/^\$5\$/);
  expect(n.files.get('local:snippets/qemurun-150-user.yaml')).not.toContain('pw\n');
});

test('a snippets storage without the snippets content type stops the install with the setting and the fix', async () => {
  const n = fakeNode('pve1', { snippets: false });
  const err = await applyUserSnippet(config, n.node, { vmid: 150, spec, userData: '#cloud-config\nruncmd: []\n', keys: [], hostname: 'x' }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApplicationFailure);
  expect(err).toMatchObject({ type: 'ConfigError', nonRetryable: true });
  expect((err as Error).message).toMatch(/^SNIPPETS_STORAGE: storage 'local' on node 'pve1' does not take snippets .*pvesm set local --content backup,iso,vztmpl,snippets/);
  expect(n.calls).toEqual([]);
});

test('a migration copies the VM\'s own snippet to the target once, and nothing for a VM without one', async () => {
  const volid = 'local:snippets/qemurun-150-user.yaml';
  const source = fakeNode('pve1', { cicustom: `user=${volid}` });
  source.files.set(volid, 'text');
  const target = fakeNode('pve2');
  const cluster = { requireNode: () => target.node } as unknown as ProxmoxCluster;
  await carryUserSnippet(cluster, source.node, 150, 'pve2');
  expect(target.files.get(volid)).toBe('text');
  await carryUserSnippet(cluster, source.node, 150, 'pve2');
  expect(target.calls).toEqual([`write ${volid}`]);

  const other = fakeNode('pve1', { cicustom: 'user=local:snippets/someone-elses.yaml' });
  await carryUserSnippet(cluster, other.node, 150, 'pve2');
  expect(target.calls).toHaveLength(1);
});
