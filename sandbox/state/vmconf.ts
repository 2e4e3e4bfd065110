import { createHash } from 'node:crypto';
import { decodeText, encodeText } from './escape';

/**
 * A VM config file in qemu-server's format (`write_vm_config` / `parse_vm_config`):
 * the description as leading `#` lines, then `key: value` lines sorted by key, then
 * optional `[PENDING]` and snapshot sections. The sandbox never writes sections itself;
 * it keeps any it finds verbatim.
 */
export interface VmConf {
  description?: string;
  props: Record<string, string>;
  /** `[PENDING]` / `[snapshot]` sections, unparsed. */
  sections: string;
}

export function parseConf(text: string): VmConf {
  const conf: VmConf = { props: {}, sections: '' };
  const lines = text.split('\n');
  let descr: string[] | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (/^\[.*\]\s*$/.test(line)) {
      conf.sections = lines.slice(i).join('\n');
      break;
    }
    const comment = /^#(.*)$/.exec(line);
    if (comment) {
      (descr ??= []).push(decodeText(comment[1]));
      continue;
    }
    const kv = /^([a-z][a-z_\-]*\d*):\s*(.*\S)\s*$/.exec(line);
    if (kv) conf.props[kv[1]] = kv[2];
  }
  if (descr) conf.description = descr.join('\n');
  return conf;
}

export function serializeConf(conf: VmConf): string {
  let raw = '';
  if (conf.description !== undefined) {
    raw += conf.description === '' ? '#\n' : conf.description.split('\n').map((l) => `#${encodeText(l)}\n`).join('');
  }
  for (const key of Object.keys(conf.props).sort()) {
    raw += `${key}: ${conf.props[key]}\n`;
  }
  if (conf.sections) raw += (raw ? '\n' : '') + conf.sections.replace(/^\n+/, '');
  return raw;
}

/**
 * A config's `digest`: the SHA1 of the file as it is on disk (parse_vm_config's
 * `sha1_hex($raw)`), which `pvesh get .../config` reports and `--digest` is checked against.
 */
export function configDigest(raw: string): string {
  return createHash('sha1').update(raw).digest('hex');
}

/** `key=value,key=value` property strings (drives, net, agent, meta...). */
export function parsePropertyString(value: string, defaultKey?: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of value.split(',')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    if (eq < 0) {
      if (defaultKey && out[defaultKey] === undefined) out[defaultKey] = part;
      else out[part] = '';
    } else {
      out[part.slice(0, eq)] = part.slice(eq + 1);
    }
  }
  return out;
}
