import { z } from 'zod';
import { OS_VERSIONS, adoptBody, cpuBody, diskBody, installBodySchema, memoryBody, nodeBody, rebuildBodySchema, workflowInputs } from '../../contract';
import { createScheduleSchema, reasonSchema, updateScheduleSchema } from '../schedules/request';
import * as answers from './responses';
import type { Role } from '../../lib/apiTokens';

/**
 * The OpenAPI 3.1 description of the API, served at /api/openapi.json. Request bodies are
 * the zod schemas the routes validate with, converted by zod's own JSON Schema output
 * (2020-12, OpenAPI 3.1's dialect); answers are the schemas of ./responses. Checks zod
 * cannot express as JSON Schema (a version valid for the OS, one timing of a schedule)
 * stay in the prose of each description.
 */

type Schema = z.ZodType;

interface Answer {
  description: string;
  json?: Schema;
  text?: Schema;
  /** `text/event-stream` of ProgressEvent. */
  events?: boolean;
  headers?: Record<string, string>;
}

interface Operation {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Express pattern, `/api/vm/:id/start`. */
  path: string;
  summary: string;
  /**
   * `operate` and `admin`: an allowed address and, when tokens are configured, a bearer
   * token of that role or above. Undefined under /api: a read (`read` role when anonymous
   * reads are off); elsewhere, open.
   */
  role?: Role;
  body?: Schema;
  query?: Record<string, { schema: Schema; description: string }>;
  headers?: Array<'Idempotency-Key' | 'Last-Event-ID' | 'Prefer'>;
  answers: Record<number, Answer>;
}

const COMPONENTS: Record<string, Schema> = {
  Error: answers.errorBody,
  ProgressEvent: answers.progressEvent,
  InstallAccepted: answers.installAccepted,
  WorkflowStatus: answers.workflowStatus,
  CancelAccepted: answers.cancelAccepted,
  VmList: answers.vmList,
  VmState: answers.vmState,
  OkText: answers.okText,
  Readiness: answers.readiness,
  CpuBaseline: answers.cpuBaseline,
  Adopted: answers.adopted,
  ScheduleAnswer: answers.scheduleAnswer,
  InstallBody: installBodySchema,
  RebuildBody: rebuildBodySchema,
  CreateScheduleBody: createScheduleSchema,
  UpdateScheduleBody: updateScheduleSchema,
  ReasonBody: reasonSchema,
  CpuBody: cpuBody,
  MemoryBody: memoryBody,
  DiskBody: diskBody,
  NodeBody: nodeBody,
  AdoptBody: adoptBody,
};

const codecPayloads = z.object({ payloads: z.array(z.object({ metadata: z.record(z.string(), z.string()).optional(), data: z.string().optional() })) });

const err = (description: string): Answer => ({ description, json: answers.errorBody });
/** Another tenant's VM answers as one nobody uses (docs/security.md, Tenants). */
const NO_SUCH_VM = "no such VM, or another tenant's";
const stream = (description: string): Answer => ({ description, events: true, headers: { 'X-Workflow-Id': 'the workflow id of the operation' } });
const vmid = { id: 'the VMID' };

const HEADER_PARAMETERS = {
  'Idempotency-Key': {
    description: 'a repeat of the same request with the same key answers for the same workflow instead of starting another; the key with another request is 422',
    schema: { type: 'string', minLength: 1, maxLength: 200 },
  },
  'Last-Event-ID': {
    description: 'the id of the last event seen: the stream continues with the events after it (also `?after=`)',
    schema: { type: 'string', pattern: '^\\d+$' },
  },
  Prefer: {
    description: '`respond-async`: answer 202 with the status resource at once, opening no event stream',
    schema: { type: 'string' },
  },
} as const;

const OPERATIONS: Operation[] = [
  { method: 'GET', path: '/api/health', summary: 'Liveness', answers: { 200: { description: 'the process answers', text: answers.okText } } },
  { method: 'GET', path: '/api/health/live', summary: 'Liveness', answers: { 200: { description: 'the process answers', text: answers.okText } } },
  {
    method: 'GET',
    path: '/api/health/ready',
    summary: 'Readiness: Temporal, the worker and every node (the checks only for DIAGNOSTICS_IPS (127.0.0.1, ::1), ALLOW_IPS and token holders)',
    answers: { 200: { description: 'ready', json: answers.readiness }, 503: { description: 'not ready; names what is down', json: answers.readiness } },
  },
  {
    method: 'GET',
    path: '/api/whoami',
    summary: "The caller's token name and the role the guards grant it (what a client should offer)",
    answers: { 200: { description: 'who the caller is', json: answers.whoami } },
  },
  { method: 'GET', path: '/api/openapi.json', summary: 'This document', answers: { 200: { description: 'OpenAPI 3.1', json: z.record(z.string(), z.unknown()) } } },
  {
    method: 'POST',
    path: '/api/vm/install',
    summary: 'Install a VM from an official cloud image',
    role: 'operate',
    body: installBodySchema,
    headers: ['Idempotency-Key', 'Prefer'],
    answers: {
      200: stream('the install, step by step, until `event: close`'),
      202: {
        description: 'with `Prefer: respond-async`: started; poll `Location`',
        json: answers.installAccepted,
        headers: { Location: 'the status resource', 'Preference-Applied': '`respond-async`', 'X-Workflow-Id': 'the workflow id' },
      },
      400: err('a field is invalid (named in the message), or `version` is not one of the OS; nothing was started'),
      422: err('the Idempotency-Key was used with another request, or by an install this deployment cannot decode'),
      429: err("this client already holds SSE_MAX_PER_CLIENT streams, or the token holds the leases its address pool allows (`maxLeasesPerHolder`, named in the message with the pool); nothing was started"),
      503: err('the server holds SSE_MAX_TOTAL streams'),
    },
  },
  {
    method: 'GET',
    path: '/api/vm/list',
    summary: 'VMs and node allocation',
    query: { disable: { schema: z.enum(['0', '1']), description: '`0` running VMs only, `1` stopped VMs only' } },
    answers: { 200: { description: 'the VMs', json: answers.vmList }, 400: err('`disable` is not 0 or 1'), 502: err('the cluster could not be read') },
  },
  {
    method: 'GET',
    path: '/api/address-pools',
    summary: 'Address pools and their leases',
    answers: { 200: { description: 'ADDRESS_POOLS, each with its leases (none configured: an empty list)', json: answers.addressPools }, 502: err("the pools' leases could not be read from Temporal") },
  },
  {
    method: 'DELETE',
    path: '/api/address-pools/:pool/leases/:address',
    summary: 'Release one address lease (the VM, if one still uses the address, is not touched)',
    role: 'admin',
    answers: {
      200: { description: 'the lease released', json: answers.leaseReleased },
      400: err('not an IPv4 address'),
      404: err('no such pool, or no lease of that address in it'),
      502: err("the pool's leases could not be read from Temporal"),
    },
  },
  {
    method: 'GET',
    path: '/api/templates',
    summary: 'Golden templates and their refresh schedules',
    answers: { 200: { description: "the cluster's QemuRun templates, newest first, and the TEMPLATES schedules", json: answers.templates }, 502: err("the cluster's templates could not be read") },
  },
  {
    method: 'POST',
    path: '/api/templates',
    summary: "Build an OS version's golden template now",
    role: 'operate',
    body: workflowInputs.buildTemplate,
    answers: { 202: { description: 'the build started (or one of the same target runs already)', json: answers.templateBuild }, 400: err('a bad os, version or storage') },
  },
  {
    method: 'GET',
    path: '/api/vm/:id/status',
    summary: 'Whether a VM runs',
    answers: { 200: { description: 'its state', text: answers.vmState }, 400: err('not a VMID'), 404: err(NO_SUCH_VM) },
  },
  ...(['start', 'reboot'] as const).map(
    (op): Operation => ({
      method: 'POST',
      path: `/api/vm/:id/${op}`,
      summary: `${op === 'start' ? 'Start' : 'Reboot'} a VM and wait for its SSH`,
      role: 'operate',
      answers: { 200: stream('the operation, until `event: close`'), 400: err('not a VMID'), 404: err(NO_SUCH_VM), 409: err('not in the managed set, or in the wrong state') },
    }),
  ),
  ...(['shutdown', 'stop', 'destroy'] as const).map(
    (op): Operation => ({
      method: 'POST',
      path: `/api/vm/:id/${op}`,
      summary: `${op[0].toUpperCase()}${op.slice(1)} a VM`,
      role: 'operate',
      answers: { 200: { description: 'done', text: answers.okText }, 400: err('not a VMID'), 404: err(NO_SUCH_VM), 409: err('not in the managed set, or in the wrong state') },
    }),
  ),
  ...(
    [
      ['cpu', cpuBody],
      ['memory', memoryBody],
      ['disk', diskBody],
    ] as const
  ).map(
    ([what, body]): Operation => ({
      method: 'POST',
      path: `/api/vm/:id/set/${what}`,
      summary: `Change a stopped VM's ${what}`,
      role: 'operate',
      body,
      answers: { 200: { description: 'done', text: answers.okText }, 400: err('the body is invalid (the field is named)'), 404: err(NO_SUCH_VM), 409: err('not in the managed set, or running') },
    }),
  ),
  {
    method: 'POST',
    path: '/api/vm/:id/set/node',
    summary: 'Migrate a stopped VM to another node',
    role: 'operate',
    body: nodeBody,
    answers: { 200: stream('the migration, until `event: close`'), 400: err('the body is invalid'), 404: err(NO_SUCH_VM), 409: err('not in the managed set, or running') },
  },
  {
    method: 'POST',
    path: '/api/vm/:id/adopt',
    summary: 'Take a VM made elsewhere into the managed set',
    role: 'admin',
    body: adoptBody,
    answers: {
      200: { description: 'adopted', json: answers.adopted },
      400: err('the body is not empty, or the VMID is outside ADOPT_VMID_RANGE'),
      404: err('no such VM'),
      409: err('already managed, a template, or protected'),
    },
  },
  {
    method: 'POST',
    path: '/api/vm/:id/rebuild',
    summary: 'Re-create a VM from the spec it records',
    role: 'operate',
    body: rebuildBodySchema,
    answers: { 200: stream('the rebuild, until `event: close`'), 400: err('the body is invalid'), 404: err(NO_SUCH_VM), 409: err('not in the managed set, or it records no spec') },
  },
  {
    method: 'GET',
    path: '/api/vm/:id/runs',
    summary: "The VM's latest runs (install, rebuilds, operations) by its VmId search attribute, newest first, with who started each",
    answers: { 200: { description: 'up to 20 runs', json: answers.vmRuns }, 400: err('not a VMID') },
  },
  {
    method: 'GET',
    path: '/api/installs/step-medians',
    summary: 'The median time of each step over the last completed installs of an OS version, template installs beside image installs',
    query: {
      os: { schema: z.enum(['debian', 'ubuntu', 'rockylinux']), description: 'the OS' },
      version: { schema: z.string(), description: 'one of its versions' },
      last: { schema: z.string().regex(/^\d{1,2}$/), description: 'how many installs, 1 to 20 (default 10)' },
    },
    answers: { 200: { description: 'the medians per source', json: answers.stepMedians }, 400: err('os, version or last is not valid (named)') },
  },
  {
    method: 'POST',
    path: '/api/cluster/cpu/refresh',
    summary: 'Detect the cluster CPU baseline now',
    role: 'admin',
    answers: { 200: { description: 'the baseline', json: answers.cpuBaseline }, 502: err('detection failed') },
  },
  {
    method: 'GET',
    path: '/api/reconcile',
    summary:
      'Dry run of the reconciler: what it would remove, VM by VM; changes nothing. Requests share one run: those arriving ' +
      'while one runs wait for it, and one younger than RECONCILE_PREVIEW_MAX_AGE seconds is answered again',
    answers: { 200: { description: 'the plan', json: answers.reconcileAnswer, headers: { Age: 'seconds since a shared run finished, when it is answered again' } }, 502: err('the survey could not read the cluster') },
  },
  {
    method: 'POST',
    path: '/api/reconcile',
    summary: 'Remove the VMs that closed or vanished installs left behind',
    role: 'admin',
    answers: { 200: { description: 'what was done', json: answers.reconcileAnswer }, 502: err('the survey could not read the cluster; nothing was removed') },
  },
  { method: 'GET', path: '/api/schedules', summary: 'Rebuild schedules', answers: { 200: { description: 'the schedules', json: answers.scheduleAnswer } } },
  {
    method: 'POST',
    path: '/api/schedules',
    summary: 'Create a rebuild schedule (exactly one of cron, every, at; either vmid or spec)',
    role: 'admin',
    body: createScheduleSchema,
    answers: {
      201: { description: 'created', json: answers.scheduleAnswer },
      400: err('the body is invalid, or the schedule runs more often than SCHEDULE_MIN_INTERVAL'),
      409: err('the id exists, or there are SCHEDULE_MAX_COUNT rebuild schedules already'),
    },
  },
  {
    method: 'GET',
    path: '/api/schedules/:id',
    summary: 'One schedule with its next and recent runs',
    answers: { 200: { description: 'the schedule', json: answers.scheduleAnswer }, 404: err('no such schedule') },
  },
  ...(['pause', 'unpause'] as const).map(
    (op): Operation => ({
      method: 'POST',
      path: `/api/schedules/:id/${op}`,
      summary: `${op === 'pause' ? 'Pause' : 'Unpause'} a schedule`,
      role: 'admin',
      body: reasonSchema,
      answers: { 200: { description: 'done', json: answers.scheduleAnswer }, 404: err('no such schedule') },
    }),
  ),
  {
    method: 'POST',
    path: '/api/schedules/:id/trigger',
    summary: 'Run a schedule now',
    role: 'admin',
    answers: { 202: { description: 'started', json: answers.scheduleAnswer }, 404: err('no such schedule') },
  },
  ...(['PATCH', 'POST'] as const).map(
    (method): Operation => ({
      method,
      path: method === 'PATCH' ? '/api/schedules/:id' : '/api/schedules/:id/update',
      summary: "Change a schedule's timing, overlap, note or password",
      role: 'admin',
      body: updateScheduleSchema,
      answers: { 200: { description: 'changed', json: answers.scheduleAnswer }, 400: err('the body is invalid'), 404: err('no such schedule') },
    }),
  ),
  {
    method: 'DELETE',
    path: '/api/schedules/:id',
    summary: 'Delete a schedule (its runs stay in history)',
    role: 'admin',
    answers: { 200: { description: 'deleted', json: answers.scheduleAnswer }, 404: err('no such schedule') },
  },
  ...['/api/workflows/:workflowId', '/api/vm/install/:workflowId'].flatMap((base): Operation[] => [
    {
      method: 'GET',
      path: base,
      summary: "An operation's status, step, VMID and IP, and its result",
      answers: { 200: { description: 'the status', json: answers.workflowStatus }, 404: err('no such QemuRun workflow') },
    },
    {
      method: 'GET',
      path: `${base}/events`,
      summary: "An operation's events again, or from Last-Event-ID on",
      headers: ['Last-Event-ID'],
      query: { after: { schema: z.string().regex(/^\d+$/), description: 'as Last-Event-ID' } },
      answers: { 200: stream('the events, until `event: close`'), 400: err('Last-Event-ID is not a number'), 404: err('no such QemuRun workflow') },
    },
    {
      method: 'GET',
      path: `${base}/steps`,
      summary: "Where an operation's time went: each step's first and last event, from the workflow's own record",
      answers: { 200: { description: 'the steps in the order they began', json: answers.stepTimeline }, 404: err('no such QemuRun workflow') },
    },
    {
      method: 'POST',
      path: `${base}/cancel`,
      summary: 'Cancel an operation; a VM it created is removed. The operate role cancels what its own token started; the admin anything',
      role: 'operate',
      answers: { 202: { description: 'cancellation requested', json: answers.cancelAccepted }, 404: err('no such QemuRun workflow'), 409: err('already finished') },
    },
  ]),
  {
    method: 'GET',
    path: '/sh/:file',
    summary: "An OS's init script, as the seed served it",
    answers: { 200: { description: 'the script', text: z.string() }, 404: err('no such script') },
  },
  {
    method: 'POST',
    path: '/codec/decode',
    summary: "Decode history payloads for the Temporal UI (secrets redacted): Temporal's remote codec protocol",
    role: 'read',
    body: codecPayloads,
    answers: { 200: { description: 'the decoded payloads', json: codecPayloads }, 400: err('not a list of payloads') },
  },
  {
    method: 'POST',
    path: '/codec/encode',
    summary: 'Refused: the codec endpoint only decodes',
    role: 'read',
    answers: { 403: err('always') },
  },
  {
    method: 'GET',
    path: '/metrics',
    summary: 'Prometheus metrics, for DIAGNOSTICS_IPS (127.0.0.1, ::1), ALLOW_IPS and token holders (everyone with PUBLIC_DIAGNOSTICS=true)',
    answers: { 200: { description: 'text format 0.0.4', text: z.string() }, 403: err('another caller') },
  },
];

/** What every operation needing operate or admin can also answer. */
const GUARD_ANSWERS: Record<number, Answer> = {
  401: err('tokens are configured (API_TOKEN, API_TOKENS_FILE) and the bearer token is missing or wrong'),
  403: err('the caller is not in ALLOW_IPS, a cross-site request, or the token lacks the role (`role` names the one needed; an operate token changing a template: admin)'),
};
/** What every read can also answer. */
const READ_ANSWERS: Record<number, Answer> = {
  401: err('a wrong bearer token, or none with ANONYMOUS_ACCESS=none'),
};

/** The role an operation needs: its own, `read` for the other routes under /api, none elsewhere. */
function roleOf(op: Operation): Role | undefined {
  if (op.role) return op.role;
  return op.path.startsWith('/api/') && !/^\/api\/(health|openapi)/.test(op.path) ? 'read' : undefined;
}
const BODY_ANSWERS: Record<number, Answer> = {
  413: err('the body is larger than 64 KiB'),
  415: err('the body is not application/json (UTF-8)'),
};

function jsonSchema(schema: Schema): Record<string, unknown> {
  const named = Object.entries(COMPONENTS).find(([, s]) => s === schema)?.[0];
  if (named) return { $ref: `#/components/schemas/${named}` };
  return convert(schema);
}

function convert(schema: Schema): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return schema === installBodySchema || schema === rebuildBodySchema ? withOsVersions(rest) : rest;
}

/**
 * The versions of each OS, which JSON Schema cannot tie to `os` readably: named in
 * `version`'s `x-os-versions`, so a client (the web console's form) offers only those.
 */
function withOsVersions(schema: Record<string, unknown>): Record<string, unknown> {
  const properties = schema.properties as Record<string, Record<string, unknown>> | undefined;
  if (!properties?.version) return schema;
  return {
    ...schema,
    properties: {
      ...properties,
      version: { ...properties.version, description: 'one of the versions of `os` (x-os-versions)', 'x-os-versions': OS_VERSIONS },
    },
  };
}

const openApiPath = (path: string) => path.replace(/:(\w+)/g, '{$1}');

function responseObject(a: Answer): Record<string, unknown> {
  const content = a.events
    ? {
        'text/event-stream': {
          schema: { type: 'string', description: 'Server-sent events; each `data:` is a ProgressEvent (x-event-data), the last is `event: close`' },
          'x-event-data': jsonSchema(answers.progressEvent),
        },
      }
    : a.json
      ? { 'application/json': { schema: jsonSchema(a.json) } }
      : a.text
        ? { 'text/plain': { schema: jsonSchema(a.text) } }
        : undefined;
  return {
    description: a.description,
    ...(a.headers ? { headers: Object.fromEntries(Object.entries(a.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }])) } : {}),
    ...(content ? { content } : {}),
  };
}

function operationObject(op: Operation): Record<string, unknown> {
  const pathParams = [...op.path.matchAll(/:(\w+)/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    description: m[1] === 'id' && op.path.startsWith('/api/vm/') ? vmid.id : m[1],
    schema: m[1] === 'id' && op.path.startsWith('/api/vm/') ? { type: 'string', pattern: '^\\d+$' } : { type: 'string' },
  }));
  const query = Object.entries(op.query ?? {}).map(([name, q]) => ({ name, in: 'query', required: false, description: q.description, schema: convert(q.schema) }));
  const headers = (op.headers ?? []).map((name) => ({ name, in: 'header', required: false, ...HEADER_PARAMETERS[name] }));
  const role = roleOf(op);
  const all: Record<number, Answer> = {
    ...op.answers,
    ...(role === 'operate' || role === 'admin' || op.path.startsWith('/codec/') ? GUARD_ANSWERS : role === 'read' ? READ_ANSWERS : {}),
    ...(op.body ? BODY_ANSWERS : {}),
    500: err('an unexpected failure'),
  };
  return {
    summary: op.summary,
    operationId: `${op.method.toLowerCase()}${op.path.replace(/[:/.](\w)/g, (_m, c: string) => c.toUpperCase())}`,
    ...(role ? { security: [{}, { bearer: [] }], 'x-role': role } : {}),
    ...(pathParams.length + query.length + headers.length > 0 ? { parameters: [...pathParams, ...query, ...headers] } : {}),
    ...(op.body ? { requestBody: { required: false, content: { 'application/json': { schema: jsonSchema(op.body) } } } } : {}),
    responses: Object.fromEntries(Object.entries(all).map(([status, a]) => [status, responseObject(a)])),
  };
}

/** Every route the document describes, as express patterns: the completeness test compares it with the app's. */
export const DOCUMENTED_ROUTES = OPERATIONS.map((op) => ({ method: op.method, path: op.path }));

export function openApiDocument(version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) (paths[openApiPath(op.path)] ??= {})[op.method.toLowerCase()] = operationObject(op);
  return {
    openapi: '3.1.1',
    info: {
      title: 'QemuRun',
      version,
      description:
        'One HTTP request to a running, SSH-ready Proxmox VE VM. Each operation names the role it needs in `x-role` ' +
        '(read, operate, admin; each includes the ones before it). Changes need an allowed address (ALLOW_IPS) and, when ' +
        'tokens are configured (API_TOKEN, API_TOKENS_FILE), a bearer token of that role; reads need a token only with ANONYMOUS_ACCESS=none.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    paths,
    components: {
      schemas: Object.fromEntries(Object.entries(COMPONENTS).map(([name, s]) => [name, convert(s)])),
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'a token of API_TOKENS_FILE (its role), or API_TOKEN (admin)' } },
    },
  };
}
