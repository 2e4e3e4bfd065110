import os from 'node:os';
import { loadConfig } from '../../lib/config';
import { LocalExecutor, SshExecutor, createExecutors } from '../../lib/executor';
import { testSpawner } from '../support/spawner';

describe('createExecutors', () => {
  it('sandbox: the main node runs locally with the sandbox environment, the others over SSH', async () => {
    const config = loadConfig({ NODE_pve2: '127.0.0.1:2202', NODE_pve3: '127.0.0.3', DATA_DIR: os.tmpdir() });
    const executors = createExecutors(config, { spawner: testSpawner(), mainNodeEnv: { PVE_SANDBOX_NODE: 'pve1' } });
    expect(Object.keys(executors).sort()).toEqual(['pve1', 'pve2', 'pve3']);
    expect(executors.pve1).toBeInstanceOf(LocalExecutor);
    expect(executors.pve2).toBeInstanceOf(SshExecutor);
    expect(executors.pve3).toBeInstanceOf(SshExecutor);
    expect((await executors.pve1.run(['sh', '-c', 'echo $PVE_SANDBOX_NODE'])).stdout).toBe('pve1\n');
  });

  const production = {
    MAIN_NODE: 'pve1',
    GATEWAY: '10.0.0.1',
    ASSIGN_STORAGE: 'local-lvm',
    NODE_pve1: '192.0.2.10',
    NODE_pve2: '192.0.2.11',
  };

  it('production off the cluster: every node, main included, over SSH', () => {
    const executors = createExecutors(loadConfig(production), { spawner: testSpawner() });
    expect(executors.pve1).toBeInstanceOf(SshExecutor);
    expect(executors.pve2).toBeInstanceOf(SshExecutor);
  });

  it('production on the main node (it owns the address): main local', () => {
    const executors = createExecutors(loadConfig({ ...production, NODE_pve1: '127.0.0.1' }), { spawner: testSpawner() });
    expect(executors.pve1).toBeInstanceOf(LocalExecutor);
    expect(executors.pve2).toBeInstanceOf(SshExecutor);
  });

  it('an address of this machine on another SSH port (a tunnel, npm run sandbox): over SSH', () => {
    const executors = createExecutors(loadConfig({ ...production, NODE_pve1: '127.0.0.1:2200' }), { spawner: testSpawner() });
    expect(executors.pve1).toBeInstanceOf(SshExecutor);
  });

  it('an explicit choice wins', () => {
    const executors = createExecutors(loadConfig({ ...production, NODE_pve1: '127.0.0.1' }), { spawner: testSpawner(), mainNodeLocal: false });
    expect(executors.pve1).toBeInstanceOf(SshExecutor);
  });
});
