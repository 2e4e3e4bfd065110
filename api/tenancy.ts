import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { adoptedTenant, isAdoptionOwner, parseSpecMarker, parseTemplateMarker, TEMPLATE_TAG, vmWorkflowId } from '../contract';
import type { ApiToken } from '../lib/apiTokens';
import type { MarkerCheck } from '../lib/vm/markerSeal';
import type { ListedWorkflow } from '../lib/temporal/workflowListing';
import { STARTED_BY } from './startedBy';

/**
 * Which tenant a VM belongs to (docs/security.md, "Tenants"). Installs record the installing
 * token's tenant in the spec marker, which the seal covers: editing the Notes cannot move a
 * VM to another tenant, and a rebuild keeps it.
 *
 * VMs installed before tenants carry none. They belong to the tenant of the token that
 * started their owner run, as its `startedBy` memo names it: with the default (a token is its
 * own tenant) an existing installation keeps working as before, and the tokens file can move
 * such VMs to a shared tenant by giving that token a `tenant=`. A rebuild's install is a
 * child of the `vm-<vmid>` run the token started, so its parent is asked. Without such a
 * record (installed without tokens, history gone) a VM belongs to no tenant: admin only.
 */
export async function tenantOfVm(
  deps: { client: Client; tokens: readonly ApiToken[] },
  vmid: number,
  check: MarkerCheck,
): Promise<string | undefined> {
  if (!check.sealed) return undefined;
  const recorded = parseSpecMarker(check.fields.spec)?.tenant ?? adoptedTenant(check.fields.adopted);
  if (recorded !== undefined) return recorded;
  const startedBy = await startedByOfRun(deps.client, isAdoptionOwner(check.fields.owner) ? vmWorkflowId(vmid) : check.fields.owner, check.fields.run);
  return startedBy === undefined ? undefined : tenantOfToken(deps.tokens, startedBy);
}

/**
 * The tenant of the token that started a workflow run (for a rebuild's install, its parent
 * run), undefined when none is recorded: such a run is the admin's to read, as a VM of no
 * tenant is.
 */
export async function tenantOfRun(deps: { client: Client; tokens: readonly ApiToken[] }, d: WorkflowExecutionDescription): Promise<string | undefined> {
  const startedBy = await startedByOf(deps.client, d, 1);
  return startedBy === undefined ? undefined : tenantOfToken(deps.tokens, startedBy);
}

/**
 * The tenant of the token that started a run visibility listed, from its decoded `memo`:
 * for a rebuild's install, which records no starter of its own, its parent run's (as
 * tenantOfRun asks). Undefined when none is recorded.
 */
export async function tenantOfListedRun(
  deps: { client: Client; tokens: readonly ApiToken[] },
  wf: ListedWorkflow,
  memo: Record<string, unknown> | undefined,
): Promise<string | undefined> {
  const parent = wf.parentExecution;
  const startedBy = await startedByOf(deps.client, { memo, parentExecution: parent ? { workflowId: parent.workflowId ?? '', runId: parent.runId ?? '' } : undefined }, 1);
  return startedBy === undefined ? undefined : tenantOfToken(deps.tokens, startedBy);
}

/** A token no longer listed still names its tenant: a token without `tenant=` was its own. */
export function tenantOfToken(tokens: readonly ApiToken[], name: string): string {
  return tokens.find((t) => t.name === name)?.tenant ?? name;
}

async function startedByOfRun(client: Client, workflowId: string, runId: string, hops = 1): Promise<string | undefined> {
  const d = await client.workflow
    .getHandle(workflowId, runId)
    .describe()
    .catch(() => undefined);
  return d && startedByOf(client, d, hops);
}

/** What names a run's starter: its memo, else its parent run's (a rebuild's install). */
type StarterRecord = Pick<WorkflowExecutionDescription, 'memo' | 'parentExecution'>;

async function startedByOf(client: Client, d: StarterRecord, hops: number): Promise<string | undefined> {
  const startedBy = d.memo?.[STARTED_BY];
  if (typeof startedBy === 'string') return startedBy;
  const parent = d.parentExecution;
  return parent?.workflowId && hops > 0 ? startedByOfRun(client, parent.workflowId, parent.runId ?? '', hops - 1) : undefined;
}

/**
 * Whether a VM is a template or a template build: Proxmox's `template: 1`, a sealed template
 * marker, or the sealed spec of a build (tagged qemurun-template). Only its build workflow
 * and the admin role change it: its clones depend on it.
 */
export function isTemplateVm(check: MarkerCheck, entries: Record<string, string> | undefined): boolean {
  if (entries?.template === '1') return true;
  if (!check.sealed) return false;
  if (parseTemplateMarker(check.fields.template) !== undefined) return true;
  return parseSpecMarker(check.fields.spec)?.tags?.includes(TEMPLATE_TAG) ?? false;
}
