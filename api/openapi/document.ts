import { z } from 'zod';
import { OS_VERSIONS, adoptBody, cpuBody, diskBody, installBodySchema, memoryBody, nodeBody, rebuildBodySchema } from '../../contract';
import { createScheduleSchema, reasonSchema, updateScheduleSchema } from '../schedules/request';
import * as answers from './responses';
import type { Role } from '../../lib/apiTokens';
import { err, type Answer } from './answer';
import { joinPath, mountPoints, type RouteSpec } from '../route';
import { ROUTE_GROUPS } from '../routes';

/**
 * The OpenAPI 3.1 description of the API, served at /api/openapi.json, built from the route
 * table (api/routes.ts): each route's method, path, role, summary, query, headers, body and
 * answers as it declares them. Request bodies are the zod schemas the routes validate with,
 * converted by zod's own JSON Schema output (2020-12, OpenAPI 3.1's dialect); answers are
 * the schemas of ./responses. Checks zod cannot express as JSON Schema (a version valid for
 * the OS, one timing of a schedule) stay in the prose of each description.
 */

type Schema = z.ZodType;

/** One operation of the document: a route of the table, at its full path. */
type Operation = Omit<RouteSpec<unknown>, 'path' | 'handle' | 'use' | 'limits'> & { path: string };

/** Every route of the table at each of its group's mount points, in the table's order. */
const OPERATIONS: Operation[] = ROUTE_GROUPS.flatMap((group) =>
  mountPoints(group).flatMap((at) => group.routes.map(({ handle: _handle, use: _use, limits: _limits, ...route }) => ({ ...route, path: joinPath(at, route.path) }))),
);

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
