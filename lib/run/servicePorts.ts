import type { Config } from '../config';
import type { PlannedPort } from './ports';

/** Every port `npm start` will listen on with this configuration, with its setting. */
export function servicePorts(config: Config): PlannedPort[] {
  if (config.role === 'worker') {
    return [{ host: config.worker.healthHost, port: config.worker.healthPort, setting: 'WORKER_HEALTH_PORT', what: "the worker's health port" }];
  }
  const ports: PlannedPort[] = [{ host: '0.0.0.0', port: config.port, setting: 'PORT', what: 'the API' }];
  // The other roles start no Temporal server and no sandbox (their settings name both).
  if (config.role === 'api') return ports;
  if (!config.temporal.address) {
    ports.push({ host: '127.0.0.1', port: config.temporal.devPort, setting: 'TEMPORAL_DEV_PORT', what: 'the Temporal dev server' });
    ports.push({ host: '127.0.0.1', port: config.temporal.uiPort, setting: 'TEMPORAL_UI_PORT', what: 'the Temporal UI' });
  }
  if (config.temporalMetricsAddress) {
    const [host, port] = config.temporalMetricsAddress.split(':');
    ports.push({ host, port: Number(port), setting: 'TEMPORAL_METRICS_ADDRESS', what: "the Temporal SDK's metrics exporter" });
  }
  if (config.sandbox) {
    config.sandboxOptions.nodes.forEach((node, i) => {
      ports.push({
        host: '127.0.0.1',
        port: config.sandboxOptions.sshPortBase + i,
        setting: 'SANDBOX_SSH_PORT_BASE',
        what: `sandbox node ${node}'s sshd`,
      });
    });
    if (config.sandboxOptions.apiPort) {
      ports.push({ host: '127.0.0.1', port: config.sandboxOptions.apiPort, setting: 'SANDBOX_API_PORT', what: "the sandbox's Proxmox REST API" });
    }
  }
  return ports;
}
