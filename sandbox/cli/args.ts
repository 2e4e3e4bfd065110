import { CliError, paramError, usageError } from './errors';

/**
 * Command-line parsing as PVE's CLIHandler does it: Getopt::Long with `-` or `--`
 * prefixes, `--opt value` or `--opt=value`, unique abbreviations, options and arguments
 * in any order; booleans take an optional value; then JSON-schema validation of every
 * parameter, reporting all bad ones at once.
 */
export interface Prop {
  type: 'string' | 'integer' | 'number' | 'boolean';
  optional?: boolean;
  minimum?: number;
  maximum?: number;
  enum?: readonly string[];
  pattern?: RegExp;
  maxLength?: number;
  /**
   * Returns an error text (without the `invalid format - ` prefix), or per-sub-key errors
   * of a property string, each as check_prop words it (`value must have a maximum value of
   * 4094`, or `invalid format - ...` for a key's own format), reported as
   * `opt: invalid format - format error` plus `opt.key: <error>`; or undefined when the
   * value is fine.
   */
  format?: (value: string) => string | Record<string, string> | undefined;
  /** Option accepts several `--opt a --opt b`. */
  array?: boolean;
}

export interface CommandDef {
  /** e.g. `qm set`, as shown in the usage line. */
  name: string;
  args: string[];
  props: Record<string, Prop>;
  /** Usage line when it is not the generated `<name> <args> [OPTIONS]`. */
  usage?: string;
}

export type Params = Record<string, string>;

export function usageLine(def: CommandDef): string {
  if (def.usage) return def.usage;
  const args = def.args.map((a) => `<${a}>`).join(' ');
  const hasOptions = Object.keys(def.props).some((k) => !def.args.includes(k));
  return `${def.name} ${args}${hasOptions ? ' [OPTIONS]' : ''}`;
}

function isInteger(v: string): boolean {
  return /^-?\d+$/.test(v);
}

function isNumber(v: string): boolean {
  return /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(v);
}

/** pve-common PVE/JSONSchema.pm `parse_boolean`. */
export function parseBoolean(v: string): string | undefined {
  if (/^(1|true|yes|on)$/i.test(v)) return '1';
  if (/^(0|false|no|off)$/i.test(v)) return '0';
  return undefined;
}

function checkProp(p: Prop, value: string): string | Record<string, string> | undefined {
  if (p.type === 'integer' && !isInteger(value)) return `type check ('integer') failed - got '${value}'`;
  if (p.type === 'number' && !isNumber(value)) return `type check ('number') failed - got '${value}'`;
  if (p.type === 'boolean' && value !== '0' && value !== '1') return `type check ('boolean') failed - got '${value}'`;
  if (p.format) {
    const err = p.format(value);
    if (typeof err === 'string') return `invalid format - ${err}`;
    if (err) return err;
  }
  if (p.pattern && !p.pattern.test(value)) return 'value does not match the regex pattern';
  if (p.maxLength !== undefined && value.length > p.maxLength) return `value may only be ${p.maxLength} characters long`;
  if (p.type === 'integer' || p.type === 'number') {
    if (p.maximum !== undefined && Number(value) > p.maximum) return `value must have a maximum value of ${p.maximum}`;
    if (p.minimum !== undefined && Number(value) < p.minimum) return `value must have a minimum value of ${p.minimum}`;
  }
  if (p.enum && !p.enum.includes(value)) return `value '${value}' does not have a value in the enumeration '${p.enum.join(', ')}'`;
  return undefined;
}

/** Parses and validates; throws a CliError exactly like the real tools would print it. */
export function parseArgs(def: CommandDef, argv: readonly string[]): Params {
  const usage = usageLine(def);
  const optionNames = Object.keys(def.props).filter((k) => !def.args.includes(k));
  const opts: Params = {};
  const positional: string[] = [];
  const warnings: string[] = [];

  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    const m = /^--?([A-Za-z][\w\-]*)(?:=(.*))?$/s.exec(a);
    if (!m) {
      positional.push(a);
      continue;
    }
    const typed = m[1];
    const exact = optionNames.find((n) => n === typed);
    const candidates = exact ? [exact] : optionNames.filter((n) => n.startsWith(typed));
    if (candidates.length !== 1) {
      warnings.push(candidates.length === 0 ? `Unknown option: ${typed}` : `Option ${typed} is ambiguous (${candidates.sort().join(', ')})`);
      continue;
    }
    const name = candidates[0];
    const prop = def.props[name];
    let value = m[2];
    if (value === undefined) {
      const next = argv[i + 1];
      if (prop.type === 'boolean') {
        // Optional value (`:s`): taken only if it does not look like an option.
        if (next !== undefined && !/^--?[A-Za-z]/.test(next)) {
          value = next;
          i++;
        } else {
          value = '';
        }
      } else if (next === undefined) {
        warnings.push(`Option ${name} requires an argument`);
        continue;
      } else {
        value = next;
        i++;
      }
    }
    if (prop.type === 'boolean') {
      // pve-common PVE/JSONSchema.pm `get_options`: empty is 1; else `parse_boolean`
      // (1|on|yes|true, 0|off|no|false, any case) or a 400 before any validation.
      const b = value === '' ? '1' : parseBoolean(value);
      if (b === undefined) throw new CliError(`400 unable to parse boolean option\n${usage}`);
      value = b;
    }
    opts[name] = prop.array && opts[name] !== undefined ? `${opts[name]}\0${value}` : value;
  }

  if (warnings.length > 0) {
    // Getopt::Long warns on stderr first; CLIHandler then raises its own 400.
    throw new CliError(`${warnings.join('\n')}\n400 unable to parse option\n${usage}`);
  }
  if (positional.length > def.args.length) throw usageError('too many arguments', usage);
  if (positional.length < def.args.filter((a) => !def.props[a]?.optional).length) throw usageError('not enough arguments', usage);
  def.args.forEach((name, idx) => {
    if (positional[idx] !== undefined) opts[name] = positional[idx];
  });

  const errors: Record<string, string> = {};
  for (const [name, prop] of Object.entries(def.props)) {
    const v = opts[name];
    if (v === undefined) {
      if (!prop.optional && !def.args.includes(name)) errors[name] = 'property is missing and it is not optional';
      continue;
    }
    for (const one of v.split('\0')) {
      const err = checkProp(prop, one);
      if (typeof err === 'string') {
        errors[name] = err;
      } else if (err) {
        errors[name] = 'invalid format - format error';
        for (const [k, v] of Object.entries(err)) errors[`${name}.${k}`] = v;
      }
    }
  }
  if (Object.keys(errors).length > 0) throw paramError(errors, usage);
  return opts;
}
