import { LIMITS } from './inputs';
import type { OsName } from './types';

/**
 * Golden templates: one Proxmox template per OS version and storage, built by the
 * `buildTemplate` workflow, which installs runs clone instead of importing the cloud image
 * and running the whole init script again.
 */

/** What a template is built for; `storage` absent: ASSIGN_STORAGE. */
export interface TemplateTarget {
  os: OsName;
  version: string;
  storage?: string;
}

export type BuildTemplateInput = TemplateTarget;

/**
 * What a template VM's `qemurun-template=` marker holds, sealed with the owner markers: a
 * Proxmox user who can edit Notes cannot make an install clone a VM of their own.
 */
export interface TemplateMarker extends TemplateTarget {
  /** The storage the template's disks are on (the target's, or ASSIGN_STORAGE's). */
  storage: string;
  /**
   * What the template's guest was prepared with: the init script's version and the settings
   * that shape the shared part (packages, mirror). A template of another recipe is stale.
   */
  recipe: string;
  /** When the template was finished (ISO 8601). */
  builtAt: string;
}

export interface BuildTemplateResult {
  vmid: number;
  name: string;
  node: string;
  storage: string;
  recipe: string;
  builtAt: string;
  elapsedSec: number;
  /** Older templates of the same target removed, and those kept because linked clones still use them. */
  retired: number[];
  kept: number[];
}

/** A template as the API and the CLI list it. */
export interface TemplateInfo extends TemplateMarker {
  vmid: number;
  name?: string;
  node: string;
  /** `current`: what an install clones; `stale`: another recipe, or older than TEMPLATE_MAX_AGE; `retired`: a newer one exists, kept for its linked clones. */
  state: 'current' | 'stale' | 'retired';
}

/** The template an install clones, as findTemplate found it; `reason` when there is none. */
export type TemplateChoice =
  | { vmid: number; name: string; node: string; storage: string; builtAt: string; linked: boolean; diskGb: number }
  /** `none`: no template of the OS version at all (an install then says nothing about templates). */
  | { reason: string; none?: boolean };

/** The key of a target, e.g. `debian-12`, `debian-12-on-local-zfs` with a storage. */
export function templateKey(t: TemplateTarget): string {
  return `${t.os}-${t.version}${t.storage !== undefined ? `-on-${t.storage}` : ''}`;
}

/** The workflow that builds a target's template: one at a time per target (the id). */
export function templateWorkflowId(t: TemplateTarget): string {
  return `${TEMPLATE_WORKFLOW_PREFIX}${templateKey(t)}`;
}

/** The schedule that refreshes a target's template (TEMPLATE_SCHEDULE). */
export function templateScheduleId(t: TemplateTarget): string {
  return `${TEMPLATE_WORKFLOW_PREFIX}${templateKey(t)}`;
}

export const TEMPLATE_WORKFLOW_PREFIX = 'template-';

/** The name prefix of template VMs: `tpl-debian-12-<vmid>` (a DNS label, as Proxmox wants). */
export function templateNamePrefix(t: TemplateTarget): string {
  return `tpl-${t.os}-${t.version.replace(/\./g, '')}`;
}

/**
 * The tag of template VMs. /cluster/resources reads tags from the config at once, while its
 * `template` flag lags by up to a status cycle: a template just built is found by its tag.
 */
export const TEMPLATE_TAG = 'qemurun-template';

/** The disk a template is built with: the smallest an install may ask for, so any install can clone it. */
export const TEMPLATE_DISK_GB = LIMITS.diskGb.min;
