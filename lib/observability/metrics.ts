import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Install steps take from milliseconds (a qm call) to many minutes (a download, an init script). */
const STEP_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];
const INSTALL_BUCKETS = [10, 30, 60, 120, 180, 300, 600, 900, 1800, 3600];
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Every metric of one service process, in a registry of its own (not prom-client's
 * global one), so each process, and each service a test starts, counts for itself.
 * The API, the worker's activities and its workflow sinks all count into it; `handler`
 * serves it wherever a process listens (the API's /metrics, a worker's health port).
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'qemurun_' });
  const registers = [registry];
  let openStreams: () => number = () => 0;
  const metrics = {
    registry,
    installsStarted: new Counter({ name: 'qemurun_installs_started_total', help: 'Installs whose workflow started, by OS (debian-12)', labelNames: ['os'], registers }),
    installsCompleted: new Counter({ name: 'qemurun_installs_completed_total', help: 'Installs that ended with an SSH-ready VM, by OS', labelNames: ['os'], registers }),
    installsFailed: new Counter({
      name: 'qemurun_installs_failed_total',
      help: 'Installs that failed or were cancelled, by OS and the step that was running',
      labelNames: ['os', 'step', 'reason'],
      registers,
    }),
    installDuration: new Histogram({
      name: 'qemurun_install_duration_seconds',
      help: 'Time from the start of an install to its end, by OS and outcome',
      labelNames: ['os', 'outcome'],
      buckets: INSTALL_BUCKETS,
      registers,
    }),
    stepDuration: new Histogram({
      name: 'qemurun_step_duration_seconds',
      help: 'Duration of one attempt of an activity (an install or VM operation step), by activity and outcome',
      labelNames: ['activity', 'outcome'],
      buckets: STEP_BUCKETS,
      registers,
    }),
    vmidRetries: new Counter({ name: 'qemurun_vmid_allocation_retries_total', help: 'VMIDs given up because another install (or a VM made by hand) took them first', registers }),
    imageCache: new Counter({ name: 'qemurun_image_cache_total', help: 'Image look-ups, by result: hit (cached and current) or miss (downloaded)', labelNames: ['result'], registers }),
    imageBytes: new Counter({ name: 'qemurun_image_downloaded_bytes_total', help: 'Bytes of cloud images downloaded', registers }),
    httpRequests: new Counter({
      name: 'qemurun_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    }),
    httpDuration: new Histogram({
      name: 'qemurun_http_request_duration_seconds',
      help: 'Time to answer an HTTP request (to its end, for event streams), by method and route pattern',
      labelNames: ['method', 'route'],
      buckets: HTTP_BUCKETS,
      registers,
    }),
    openStreams: new Gauge({
      name: 'qemurun_event_streams_open',
      help: 'Event streams (SSE) open now',
      registers,
      collect() {
        this.set(openStreams());
      },
    }),
    /** Who holds the streams (the API's limiter) tells how many are open, at scrape time. */
    countOpenStreams(count: () => number): void {
      openStreams = count;
    },
  };
  return metrics;
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Serves the registry in Prometheus' text format: mountable on express or a bare http server. */
export function metricsHandler(registry: Registry) {
  return (_req: IncomingMessage, res: ServerResponse): void => {
    registry
      .metrics()
      .then((text) => {
        res.statusCode = 200;
        res.setHeader('Content-Type', registry.contentType);
        res.end(text);
      })
      .catch((err: unknown) => {
        res.statusCode = 500;
        res.setHeader('Content-Type', 'text/plain');
        res.end(`metrics failed: ${String(err)}\n`);
      });
  };
}
