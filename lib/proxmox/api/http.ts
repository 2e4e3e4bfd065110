import type http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { classifyFailure } from '../errors';
import { requiredPrivilege } from './privileges';
import { fixFor } from './hints';

/** How to reach and trust the Proxmox VE API. The token is a secret: it stays in here. */
export interface ApiSettings {
  /** `https://10.0.0.11:8006`, more than one for failover, tried in order. */
  urls: readonly string[];
  /** `user@realm!tokenid=secret`. */
  token: string;
  /** PEM of the CA that signed the nodes' certificates (e.g. /etc/pve/pve-root-ca.pem). */
  ca?: string;
  /**
   * SHA-256 fingerprint of the certificate to accept, whoever signed it: one for every URL,
   * or one per URL in the order of `urls` (each node has a certificate of its own).
   */
  fingerprint?: string | readonly string[];
  /** Accept any certificate. */
  insecure?: boolean;
  /** Per request; tasks are followed by many short requests. Default 60 s. */
  timeoutMs?: number;
}

export type Params = Record<string, string | number | boolean | undefined>;

/** The API could not be reached at any of its URLs (or not trusted): worth a retry. */
export class ApiUnreachableError extends Error {
  override readonly name = 'ApiUnreachableError';
}

/** `AA:BB:...` or `aabb...` → `aabb...`. */
export function normalizeFingerprint(fp: string): string {
  const hex = fp.replace(/[:\s]/g, '').toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error('must be a SHA-256 fingerprint (64 hex digits, colons allowed)');
  return hex;
}

/**
 * An agent that hands a connection to a request only once its certificate is trusted, so
 * the token is never sent to a server that fails the check. With a pinned fingerprint the
 * certificate chain is not verified (a node's certificate is usually self-signed), the
 * pin is: a mismatch ends the connection before a byte of the request is written.
 */
class PinnedAgent extends https.Agent {
  /** `which` says whose pin it is in a refusal: `https://10.0.0.12:8006 (2nd of PROXMOX_API_FINGERPRINT)`. */
  constructor(
    private readonly pin: string,
    private readonly which = '',
  ) {
    super({ keepAlive: true });
  }

  override createConnection(options: http.ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | undefined {
    const socket = tls.connect({ ...(options as tls.ConnectionOptions), rejectUnauthorized: false });
    const fail = (err: Error) => {
      socket.destroy();
      callback?.(err, socket);
    };
    socket.once('error', fail);
    socket.once('secureConnect', () => {
      socket.off('error', fail);
      const seen = socket.getPeerCertificate().fingerprint256?.replace(/:/g, '').toLowerCase();
      if (seen !== this.pin) {
        const shown = seen ? seen.toUpperCase().match(/../g)!.join(':') : 'none';
        fail(
          new Error(
            `certificate fingerprint ${shown} is not the pinned PROXMOX_API_FINGERPRINT${this.which ? ` ${this.which}` : ''}: if the node's certificate was renewed, pin the new one (pvenode cert info) or trust the cluster's CA (PROXMOX_API_CA_FILE)`,
          ),
        );
        return;
      }
      callback?.(null, socket);
    });
    return undefined;
  }
}

const ordinal = (n: number) => `${n}${n % 10 === 1 && n !== 11 ? 'st' : n % 10 === 2 && n !== 12 ? 'nd' : n % 10 === 3 && n !== 13 ? 'rd' : 'th'}`;

/** The agent of each URL: with one pin per URL, one agent each, holding its own pin. */
function agentsFor(s: ApiSettings, urls: URL[]): https.Agent[] {
  const pins = s.fingerprint === undefined ? undefined : Array.isArray(s.fingerprint) ? s.fingerprint : [s.fingerprint];
  if (pins && pins.length > 1) {
    if (pins.length !== urls.length) throw new Error(`${pins.length} fingerprints for ${urls.length} URLs: give one for all, or one per URL`);
    return pins.map((p, i) => new PinnedAgent(normalizeFingerprint(p), `for ${urls[i].origin} (${ordinal(i + 1)} of ${pins.length})`));
  }
  const one = pins
    ? new PinnedAgent(normalizeFingerprint(pins[0]))
    : s.insecure
      ? new https.Agent({ keepAlive: true, rejectUnauthorized: false })
      : new https.Agent({ keepAlive: true, ...(s.ca ? { ca: s.ca } : {}) });
  return urls.map(() => one);
}

/** Form fields as the API's schema expects them: booleans 1/0, undefined left out. */
export function formEncode(params: Params): string {
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined) continue;
    out.append(k, typeof v === 'boolean' ? (v ? '1' : '0') : String(v));
  }
  return out.toString();
}

interface RawResponse {
  status: number;
  statusMessage: string;
  body: string;
}

/** Errors that happen before a request is on the wire: any method may try the next URL. */
const NOT_SENT: ReadonlySet<string> = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET_BEFORE_SEND']);

/**
 * The Proxmox VE REST API (`/api2/json`) with an API token: one request in, the `data`
 * member out; a refusal becomes the error class of ../errors, mapped from the status and
 * the message Proxmox puts in the status line (`403 Permission check failed (/vms/120,
 * VM.Allocate)`), as pvesh would print it. Every node serves the whole cluster's API, so
 * the URLs are alternatives: one that cannot be reached is skipped for the next, and the
 * one that answered is tried first from then on.
 */
export class PveApi {
  private readonly agents: Map<URL, https.Agent>;
  private readonly urls: URL[];
  private preferred = 0;
  private readonly timeoutMs: number;

  constructor(private readonly settings: ApiSettings) {
    if (settings.urls.length === 0) throw new Error('no Proxmox API URL');
    this.urls = settings.urls.map((u) => new URL(u.replace(/\/+$/, '')));
    const agents = agentsFor(settings, this.urls);
    this.agents = new Map(this.urls.map((u, i) => [u, agents[i]]));
    this.timeoutMs = settings.timeoutMs ?? 60_000;
  }

  /** The URLs in the order they will be tried. */
  get endpoints(): string[] {
    return this.order().map((u) => u.origin);
  }

  close(): void {
    for (const a of new Set(this.agents.values())) a.destroy();
  }

  async get<T = unknown>(path: string, params: Params = {}, opts: { signal?: AbortSignal; node?: string } = {}): Promise<T> {
    return this.request<T>('GET', path, params, opts);
  }

  async request<T = unknown>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    params: Params = {},
    opts: { signal?: AbortSignal; node?: string; timeoutMs?: number } = {},
  ): Promise<T> {
    const form = formEncode(params);
    const inQuery = method === 'GET' || method === 'DELETE';
    const failures: string[] = [];
    const order = this.order();
    for (const base of order) {
      let res: RawResponse;
      try {
        res = await this.send(base, method, `/api2/json${path}${inQuery && form ? `?${form}` : ''}`, inQuery ? undefined : form, opts);
      } catch (err) {
        if (opts.signal?.aborted) throw err;
        const e = err as NodeJS.ErrnoException & { sent?: boolean };
        failures.push(`${base.origin}: ${e.message}`);
        // A request that may have reached a node is not sent again elsewhere, unless it only reads.
        if (e.sent && method !== 'GET') throw new ApiUnreachableError(`${method} ${path}: ${failures.join('; ')}`);
        continue;
      }
      this.preferred = this.urls.indexOf(base);
      return this.answer<T>(res, method, path, params, opts.node);
    }
    throw new ApiUnreachableError(`Proxmox API unreachable: ${failures.join('; ')}`);
  }

  private order(): URL[] {
    return [...this.urls.slice(this.preferred), ...this.urls.slice(0, this.preferred)];
  }

  private answer<T>(res: RawResponse, method: string, path: string, params: Params, node?: string): T {
    let body: { data?: unknown; errors?: Record<string, string>; message?: string } = {};
    try {
      body = res.body === '' ? {} : JSON.parse(res.body);
    } catch {
      // An error page of a proxy in front of the API; the status line says enough.
    }
    if (res.status >= 200 && res.status < 300) return body.data as T;
    const errors = Object.entries(body.errors ?? {}).map(([k, v]) => `${k}: ${String(v).trim()}`);
    const message = (typeof body.message === 'string' && body.message.trim()) || res.statusMessage || 'no message';
    // Some checks name no privilege; the call tells which one it was.
    const needed = res.status === 403 && !/\(.+, .+\)/.test(message) ? requiredPrivilege(method, path, params) : undefined;
    if (needed) errors.unshift(`the token lacks ${needed.privilege} on ${needed.path}`);
    const fix = fixFor(res.status, [message, ...errors].join('\n'), path);
    if (fix) errors.push(`to fix: ${fix}`);
    throw classifyFailure({
      node: node ?? nodeOfPath(path) ?? 'cluster',
      command: `${method} ${path}`,
      exitCode: res.status,
      http: true,
      stderr: [`${res.status} ${message.trim()}`, ...errors].join('\n'),
    });
  }

  private send(base: URL, method: string, path: string, form: string | undefined, opts: { signal?: AbortSignal; timeoutMs?: number }): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      let sent = false;
      const req = https.request(
        {
          protocol: 'https:',
          hostname: base.hostname.replace(/^\[|\]$/g, ''),
          port: base.port || 8006,
          method,
          path: `${base.pathname === '/' ? '' : base.pathname}${path}`,
          agent: this.agents.get(base),
          signal: opts.signal,
          headers: {
            Authorization: `PVEAPIToken=${this.settings.token}`,
            Accept: 'application/json',
            ...(form !== undefined ? { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': Buffer.byteLength(form) } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, statusMessage: res.statusMessage ?? '', body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
      if (timeoutMs > 0) {
        req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })));
      }
      req.on('socket', (socket) => {
        // A pooled socket, or a fresh one once connected (and, when pinned, checked).
        const mark = () => (sent = true);
        if (!socket.connecting && (socket as tls.TLSSocket).encrypted) mark();
        else socket.once('secureConnect', mark);
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        reject(Object.assign(err, { sent: sent && !NOT_SENT.has(err.code ?? '') }));
      });
      req.end(form);
    });
  }
}

/** `/nodes/pve1/qemu/120` → pve1. */
function nodeOfPath(path: string): string | undefined {
  return /^\/nodes\/([^/]+)/.exec(path)?.[1];
}

