import { z } from 'zod';

/**
 * The shapes the API answers with, as zod schemas: the OpenAPI document is generated from
 * them (and from the request schemas the routes validate with), and the tests check real
 * answers against that document.
 */

export const errorBody = z
  .object({
    success: z.literal(false),
    message: z.string().describe('what went wrong; a bad input names the field: "please check your input: cpu: …"'),
    workflowId: z.string().optional(),
    status: z.string().optional(),
  })
  ;

export const okText = z.literal('ok');

export const progressEvent = z
  .object({
    step: z.string().describe('the step, "VM creation > import disk"'),
    status: z.enum(['processing', 'success', 'info', 'error']),
    message: z.string().describe('"[*]" info, "[+]" success, "[-]" failure'),
  })
  .meta({
    description:
      'The `data:` of one event of a `text/event-stream` answer, whose `id:` is the event\'s sequence number (send it back as `Last-Event-ID` to re-attach). The stream ends with `event: close` and `data: {}`; idle streams get `: keepalive` comments.',
  });

export const installAccepted = z
  .object({ success: z.literal(true), workflowId: z.string(), status: z.string().describe('the status resource, as in `Location`') })
  ;

const installResult = z.object({
  vmid: z.number().int(),
  ip: z.string(),
  user: z.string(),
  node: z.string(),
  name: z.string(),
  elapsedSec: z.number(),
});

export const workflowStatus = z
  .object({
    success: z.literal(true),
    workflowId: z.string(),
    runId: z.string(),
    type: z.string().describe('the workflow type: installVm, vmStart, vmRebuild, …'),
    status: z.enum(['RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'CONTINUED_AS_NEW', 'TIMED_OUT', 'UNKNOWN']),
    startTime: z.string(),
    closeTime: z.string().optional(),
    events: z.number().int().optional().describe('how many events the operation has sent'),
    step: z.string().optional(),
    vmid: z.number().int().optional(),
    ip: z.string().optional(),
    result: z.union([installResult, z.record(z.string(), z.unknown()), z.null()]).optional(),
    error: z.string().optional(),
  })
  ;

const roleName = z.enum(['read', 'operate', 'admin']);

export const whoami = z.object({
  success: z.literal(true),
  name: z.string().nullable().describe("the bearer token's name; null without one (or with no tokens configured)"),
  role: roleName.describe('the most the caller may do: the token\'s role, every role without tokens, `read` from outside ALLOW_IPS'),
  tokens: z.boolean().describe('whether tokens are configured'),
});

const runStatus = z.enum(['RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'CONTINUED_AS_NEW', 'TIMED_OUT', 'PAUSED', 'UNSPECIFIED', 'UNKNOWN']);

export const vmRuns = z.object({
  success: z.literal(true),
  vmid: z.number().int(),
  runs: z.array(
    z.object({
      workflowId: z.string(),
      runId: z.string(),
      type: z.string().describe('installVm, vmRebuild, vmStart, …'),
      status: runStatus,
      startTime: z.string().optional(),
      closeTime: z.string().optional(),
      startedBy: z.string().optional().describe('the name of the token that started it'),
    }),
  ),
  temporalUi: z.object({ port: z.number().int(), namespace: z.string() }).describe("the Temporal UI's port and the namespace, to link to a run"),
});

export const stepTimeline = z.object({
  success: z.literal(true),
  workflowId: z.string(),
  type: z.string(),
  status: runStatus,
  vmOs: z.string().optional().describe('the VmOs search attribute, `debian-12`: what GET /api/installs/step-medians compares it with'),
  steps: z.array(
    z.object({
      step: z.string(),
      start: z.number().describe('workflow time of its first event, ms since the epoch'),
      end: z.number().describe('workflow time of its last event'),
      ms: z.number().describe('the time it ran: the sum of its runs'),
      runs: z
        .array(z.object({ start: z.number(), end: z.number() }))
        .describe("when it ran: from the line that started it to its done line or error; what it noted after (a pinned host key) is not its time, and an SSH wait after a reboot is a second run"),
      status: z.enum(['done', 'error', 'running']).describe('running only while the operation runs'),
    }),
  ),
});

const mediansOfSource = z.object({
  installs: z.number().int().describe('how many of the installs were of this source'),
  steps: z.array(z.object({ step: z.string(), medianMs: z.number(), installs: z.number().int().describe('how many had the step') })),
});

export const stepMedians = z.object({
  success: z.literal(true),
  os: z.string(),
  version: z.string(),
  image: mediansOfSource.describe('installs built from the cloud image'),
  template: mediansOfSource.describe("installs that cloned the OS version's template"),
});

export const cancelAccepted = z.object({ success: z.literal(true), message: z.string() });

const vmEntry = z.object({
  vmid: z.number().int(),
  name: z.string(),
  os: z.string(),
  running: z.boolean(),
  node: z.string(),
  cpu: z.number(),
  disk: z.number(),
  memory: z.number(),
  memory_used: z.number(),
  ip: z.string().optional().describe("with address pools: the VM's IPv4 address, its lease, else GATEWAY's /24 plus the VMID"),
  address_pool: z.string().optional().describe('the address pool the address is leased from'),
});

const addressLease = z.object({
  address: z.string(),
  owner: z.string().describe('the install (or template build) workflow the address was leased to'),
  vmid: z.number().int().optional(),
  since: z.string(),
  generation: z.number().int().optional().describe('which lease this is: a release names it, so one sent again after the address was leased anew releases nothing (absent: a lease made before generations, 0)'),
  holder: z.string().optional().describe("who the pool's maxLeasesPerHolder counts it against: `token:<name>`, or `anonymous`"),
});

export const leaseReleased = z.object({ success: z.literal(true), pool: z.string(), released: addressLease });

export const addressPools = z.object({
  count: z.number().int(),
  pools: z.array(
    z.object({
      name: z.string(),
      cidr: z.string(),
      gateway: z.string(),
      bridge: z.string().optional(),
      vlan: z.number().int().optional(),
      reserved: z.array(z.string()),
      size: z.number().int().describe('addresses handed out in all: not the network, broadcast, gateway or reserved ones'),
      used: z.number().int(),
      free: z.number().int(),
      leases: z.array(addressLease),
    }),
  ),
});

const nodeEntry = z.object({
  node: z.string(),
  max_cpu: z.number(),
  max_memory: z.number(),
  cpu: z.number(),
  memory: z.number(),
  memory_used: z.number(),
  disk: z.number(),
  running: z.boolean(),
});

export const vmList = z
  .object({ count: z.number().int(), list: z.array(vmEntry), cluster: z.array(nodeEntry), data: z.array(vmEntry).describe('the same as `list`, for the seed\'s clients') })
  ;

export const vmState = z.enum(['running', 'stopped']);

export const readiness = z
  .object({
    ready: z.boolean(),
    // Only for DIAGNOSTICS_IPS, ALLOW_IPS and token holders (or with PUBLIC_DIAGNOSTICS=true).
    checks: z.record(z.string(), z.string()).optional(),
    message: z.string().optional(),
  })
  ;

export const cpuBaseline = z.object({ success: z.literal(true), cpu: z.string(), nodes: z.array(z.string()) });

export const adopted = z
  .object({ success: z.literal(true), message: z.string(), vmid: z.number().int(), owner: z.string(), workflowId: z.string() })
  ;

/** Schedules answer with their description; the fields are those of docs/api.md's Schedules. */
export const scheduleAnswer = z.looseObject({ success: z.literal(true) });

export const templates = z.object({
  count: z.number().int(),
  templates: z.array(
    z.object({
      vmid: z.number().int(),
      name: z.string().optional(),
      node: z.string(),
      os: z.string(),
      version: z.string(),
      storage: z.string(),
      recipe: z.string().describe("what the template's guest was prepared with: the init script's version, INIT_PACKAGES, INIT_MIRROR, INIT_LOCALE"),
      builtAt: z.string(),
      state: z.enum(['current', 'stale', 'retired']).describe('current: what installs clone; stale: another recipe, or older than TEMPLATE_MAX_AGE; retired: a newer one exists, kept while linked clones use it'),
    }),
  ),
  schedules: z.array(z.object({ target: z.string(), scheduleId: z.string(), cron: z.string() })).describe('the TEMPLATES schedules'),
  maxAgeSec: z.number(),
});

export const templateBuild = z.object({
  success: z.literal(true),
  workflowId: z.string(),
  started: z.boolean().describe('false: a build of this target was running already, and that one is answered'),
  status: z.string(),
  events: z.string().describe("the build's event stream"),
});

export const reconcileAnswer = z.object({
  success: z.literal(true),
  workflowId: z.string(),
  dryRun: z.boolean(),
  vms: z
    .array(
      z.object({
        vmid: z.number().int(),
        node: z.string(),
        name: z.string().optional(),
        owner: z.string().optional().describe('the workflow id its `qemurun-owner` marker names'),
        ownerState: z.string().optional().describe("the owner's state in Temporal: RUNNING, COMPLETED, FAILED, TERMINATED, …, UNKNOWN_TO_NAMESPACE"),
        action: z.enum(['keep', 'remove', 'removed', 'gone', 'failed']).describe('keep/remove: the plan (and a dry run); removed, gone, failed: what a run did'),
        reason: z.string(),
      }),
    )
    .describe('every VM of the cluster, by VMID'),
  removed: z.array(z.number().int()),
  failed: z.array(z.number().int()),
  leases: z
    .array(
      z.object({
        pool: z.string(),
        address: z.string(),
        generation: z.number().int(),
        owner: z.string(),
        vmid: z.number().int().optional(),
        action: z.enum(['keep', 'release', 'released', 'gone', 'failed']).describe('keep/release: the plan (and a dry run); released, gone, failed: what a run did'),
        reason: z.string(),
      }),
    )
    .optional()
    .describe('every address lease of the pools: released when its owner runs no more and no VM at its VMID uses the address'),
  released: z.array(z.string()).optional().describe('the addresses released'),
});
