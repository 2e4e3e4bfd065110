import type http from 'node:http';
import { parseArgs, type Prop } from '../cli/args';
import { makeCtx, type Ctx } from '../cli/context';
import { CliError, ParamError } from '../cli/errors';
import { nodeOf, nodePveVersion } from '../state/model';
import { VMID } from '../cli/vmOptions';
import * as f from '../cli/formats';
import { uriUnescape } from '../state/escape';
import { takeFaults } from '../state/faults';
import { ApiError, fromCli, paramExc, permExc } from './errors';
import { aclChildren, loadAccess, privilegesOn, verifyToken, type AccessConfig, type ApiToken } from './access';
import { appendApiRequest } from './requestLog';
import type { TaskForker } from './tasks';

/**
 * Request handling of the sandbox's REST API, after PVE::APIServer::AnyEvent and
 * PVE::HTTPServer: `/api2/json/<path>`, token authentication, the handler found by method
 * and path, path and body parameters merged and checked against the handler's schema,
 * the answer as `{"data": ...}`; a failure as its status with the message as reason phrase
 * and `{"data": null, "message": ...}` (plus `errors` per parameter).
 */

export interface Req {
  dir: string;
  /** Path parameters and query/body parameters, as strings. */
  params: Record<string, string>;
  token: ApiToken;
  /** The API's user: the token id `user@realm!tokenid`. */
  user: string;
  /** What one call of the shared CLI code sees, on `node`, its printed lines dropped. */
  ctx(node?: string): Ctx;
  /** RPCEnvironment::check: all of `privs` on `path`, or 403. With `any`, one of them. */
  check(path: string, privs: string[], any?: boolean): void;
  can(path: string, privs: string[]): boolean;
  /**
   * RPCEnvironment::check_sdn_bridge with `$noerr`: one of `privs` on
   * `/sdn/zones/<zone>/<bridge>`, or on one of the bridge's VLANs an ACL entry names.
   */
  canUseBridge(zone: string, bridge: string, privs: string[]): boolean;
  /** Extra top-level members of the answer (`total`). */
  extra: Record<string, unknown>;
  /** Starts the worker process of a task (PVE's fork_worker). */
  tasks: TaskForker;
}

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** e.g. `/nodes/{node}/qemu/{vmid}/config` */
  path: string;
  /** Body/query parameters (path parameters are checked by their name); undefined = none. */
  props?: Record<string, Prop>;
  handle(req: Req): unknown;
}

export interface Compiled extends Route {
  re: RegExp;
  names: string[];
}

export function compile(routes: Route[]): Compiled[] {
  return routes.map((r) => {
    const names: string[] = [];
    const re = new RegExp(`^${r.path.replace(/\{(\w+)\}/g, (_m, n: string) => (names.push(n), '([^/]+)'))}$`);
    return { ...r, re, names };
  });
}

const PATH_PROPS: Record<string, Prop> = {
  node: { type: 'string', format: f.nodeName },
  vmid: VMID,
  storage: { type: 'string', format: f.storageId },
  upid: { type: 'string' },
};

/** JSONSchema validation of the merged parameters, with PVE's messages. */
function validate(route: Compiled, params: Record<string, string>): void {
  const props: Record<string, Prop> = { ...route.props };
  for (const n of route.names) props[n] = PATH_PROPS[n] ?? { type: 'string' };
  const errors: Record<string, string> = {};
  for (const k of Object.keys(params)) {
    if (!props[k]) errors[k] = 'property is not defined in schema and the schema does not allow additional properties';
  }
  // Over HTTP nothing is parsed before the schema check (pve-common PVE/RESTHandler.pm
  // `handle` → PVE/JSONSchema.pm `validate`, `check_type`): a boolean is `1` or `0` (or a
  // JSON true/false, sent on as 1/0 by readBody), never `yes` or `true`.
  for (const [k, v] of Object.entries(params)) {
    if (props[k]?.type === 'boolean' && v !== '0' && v !== '1') errors[k] = `type check ('boolean') failed - got '${v}'`;
  }
  const argv = Object.entries(params)
    .filter(([k]) => props[k] && !errors[k])
    .map(([k, v]) => `--${k}=${v}`);
  try {
    Object.assign(params, parseArgs({ name: 'api', args: [], props }, argv));
  } catch (e) {
    if (!(e instanceof ParamError)) throw e;
    Object.assign(errors, e.errors);
  }
  if (Object.keys(errors).length > 0) throw fromCli(new ParamError(errors, ''));
}

async function readBody(req: http.IncomingMessage): Promise<Record<string, string>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > 64 * 1024) throw new ApiError(413, 'Request Entity Too Large');
    chunks.push(c as Buffer);
  }
  const raw = Buffer.concat(chunks).toString('utf8');
  if (raw === '') return {};
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/json') {
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      throw new ApiError(400, 'Bad Request: invalid JSON');
    }
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new ApiError(400, 'Bad Request: JSON body is not an object');
    return Object.fromEntries(
      Object.entries(body as Record<string, unknown>)
        .filter(([, v]) => v !== null && v !== undefined)
        .map(([k, v]) => [k, typeof v === 'boolean' ? (v ? '1' : '0') : String(v)]),
    );
  }
  return Object.fromEntries(new URLSearchParams(raw));
}

function send(res: http.ServerResponse, status: number, reason: string | undefined, body: string | undefined): void {
  // The reason phrase is the message's first line (AnyEvent.pm's response()).
  const phrase = reason?.split('\n')[0].replace(/[^\x20-\x7e]/g, '?');
  const headers: Record<string, string> = { 'Cache-Control': 'max-age=0', Pragma: 'no-cache', Server: 'pve-api-daemon/3.0' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json;charset=UTF-8';
    headers['Content-Length'] = String(Buffer.byteLength(body));
  }
  res.writeHead(status, phrase || undefined, headers);
  res.end(body);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const PVESH_VERB: Record<string, string> = { GET: 'get', POST: 'create', PUT: 'set', DELETE: 'delete' };

/**
 * Faults injected for the pvesh call a request amounts to (`pvesh get /cluster/resources`,
 * `pvesh create /nodes/pve1/qemu`...) apply to it: a delay, a hang, or a failure answered
 * as the API answers the error pvesh would print with that text: `400 Parameter
 * verification failed.` and its `param: message` lines a 400 with `errors`, another
 * `400 …` a 400, anything else a 500 with the text. One fault thus hits the CLI and the
 * API way alike.
 */
async function injectedFaults(dir: string, node: string | undefined, method: string, relPath: string): Promise<void> {
  const model = makeCtx(dir, node ?? '').model;
  for (const fault of takeFaults(dir, node ?? model.mainNode, ['pvesh', PVESH_VERB[method], relPath])) {
    await sleep(fault.latencyMs ?? 0);
    if (fault.hangMs !== undefined) await sleep(fault.hangMs);
    if (fault.hangMs !== undefined || fault.stderr !== undefined || fault.exitCode !== undefined) {
      throw faultError((fault.stderr ?? 'command failed').replace(/\n+$/, ''));
    }
  }
}

function faultError(text: string): unknown {
  const param = /^400 Parameter verification failed\.\n([\s\S]+)$/.exec(text);
  if (!param) return fromCli(new CliError(text));
  const errors = param[1].split('\n').flatMap((l) => {
    const m = /^(\S+): (.+)$/.exec(l);
    return m ? [[m[1], m[2]] as const] : [];
  });
  return paramExc(Object.fromEntries(errors));
}

export interface ServerOptions {
  dir: string;
  routes: Compiled[];
  /** PVE delays every 401 answer by 3 s (against password guessing). */
  authFailureDelayMs: number;
  log(line: string): void;
  tasks: TaskForker;
}

export async function handle(o: ServerOptions, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const started = Date.now();
  const url = new URL(req.url ?? '/', 'https://localhost');
  const m = /^\/api2\/json(\/.*)?$/.exec(url.pathname);
  if (!m) return send(res, 501, 'no such uri', undefined);
  const relPath = (m[1] ?? '/').replace(/\/+$/, '') || '/';
  const method = (req.method ?? 'GET').toUpperCase();

  // Authentication first: an unknown path answers 401 too, to a caller without a token.
  const header = req.headers.authorization ?? '';
  const value = /(?:^|\s)PVEAPIToken=([^;]*)/.exec(header)?.[1];
  let token: ApiToken;
  try {
    if (!value) throw new ApiError(401, 'No ticket');
    try {
      token = verifyToken(o.dir, uriUnescape(value));
    } catch (e) {
      o.log(`authentication failure; rhost=${req.socket.remoteAddress} msg=${(e as Error).message}`);
      throw new ApiError(401, 'Authentication failed!');
    }
  } catch (e) {
    await sleep(Math.max(0, o.authFailureDelayMs - (Date.now() - started)));
    return send(res, 401, (e as Error).message, undefined);
  }

  const extra: Record<string, unknown> = {};
  let sent: Record<string, string> = {};
  const answer = (status: number, reason: string | undefined, body: string | undefined, data?: unknown) => {
    // Logged before it is sent: a caller that reads the log once it has its answer finds
    // the request there, however late this (nicer) process gets the CPU back.
    const node = /^\/nodes\/([^/]+)/.exec(relPath)?.[1];
    appendApiRequest(o.dir, {
      ...(node !== undefined ? { node } : {}),
      method,
      path: relPath,
      params: sent,
      status,
      ...(typeof data === 'string' && data.startsWith('UPID:') ? { upid: data } : {}),
      startedAt: new Date(started).toISOString(),
      durationMs: Date.now() - started,
    });
    send(res, status, reason, body);
  };
  try {
    const route = o.routes.find((r) => r.method === method && r.re.test(relPath));
    if (!route) throw new ApiError(501, `Method '${method} ${relPath}' not implemented`);
    const params: Record<string, string> = {};
    for (const [k, v] of url.searchParams) params[k] = v;
    if (method !== 'GET') Object.assign(params, await readBody(req));
    sent = { ...params };
    const pm = route.re.exec(relPath)!;
    const conflicts: Record<string, string> = {};
    route.names.forEach((n, i) => {
      const v = decodeURIComponent(pm[i + 1]);
      if (params[n] !== undefined && params[n] !== v) conflicts[n] = 'duplicate parameter (already defined in URI) with conflicting values!';
      params[n] = v;
    });
    if (Object.keys(conflicts).length) throw paramExc(conflicts);
    validate(route, params);
    await injectedFaults(o.dir, params.node, method, relPath);
    const ctx = (node?: string) => makeCtx(o.dir, node ?? params.node ?? '', { out: () => undefined, err: () => undefined });
    if (params.node !== undefined) {
      const model = ctx().model;
      // pveproxy resolves the node to proxy the request to before anything else.
      if (!nodeOf(model, params.node)) {
        throw new ApiError(500, `hostname lookup '${params.node}' failed - failed to get address info for: ${params.node}: Name or service not known\n`);
      }
    }
    let access: AccessConfig | undefined;
    // Checked on the node the request is for (pveproxy proxies `proxyto => 'node'` calls,
    // and that node checks them too), else on the one this server stands for.
    let release: string | undefined;
    const checkingRelease = () => {
      const model = ctx().model;
      return nodePveVersion(model, params.node ?? model.mainNode).release;
    };
    const privileges = (p: string) => privilegesOn(token!, p, (access ??= loadAccess(o.dir)), (release ??= checkingRelease()));
    const r: Req = {
      dir: o.dir,
      params,
      token: token!,
      user: token!.tokenid,
      ctx,
      extra,
      tasks: o.tasks,
      can: (p, privs) => {
        const have = privileges(p);
        return privs.every((x) => have.has(x));
      },
      canUseBridge: (zone, bridge, privs) => {
        const path = `/sdn/zones/${zone}/${bridge}`;
        const any = (p: string) => privs.some((x) => privileges(p).has(x));
        return any(path) || aclChildren(o.dir, path).some((vlan) => any(`${path}/${vlan}`));
      },
      check: (p, privs, any = false) => {
        const have = privileges(p);
        if (any ? !privs.some((x) => have.has(x)) : !privs.every((x) => have.has(x))) {
          throw permExc(any ? `${p}, ${privs.join('|')}` : `${p}, ${privs.find((x) => !have.has(x))}`);
        }
      },
    };
    const data = await route.handle(r);
    answer(200, undefined, JSON.stringify({ data: data ?? null, ...extra }), data);
  } catch (e0) {
    const e = fromCli(e0);
    if (!(e instanceof ApiError)) {
      o.log(`internal error on ${method} ${relPath}: ${(e as Error).stack ?? e}`);
      return answer(500, 'Internal Server Error', JSON.stringify({ data: null, message: `${(e as Error).message}\n` }));
    }
    const body: Record<string, unknown> = { data: null, message: e.message };
    if (e.errors) body.errors = e.errors;
    answer(e.status, e.message, JSON.stringify(body));
  }
}
