import type { z } from 'zod';

function valueAt(body: unknown, path: PropertyKey[]): unknown {
  let v: unknown = body;
  for (const key of path) {
    if (typeof v !== 'object' || v === null) return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

/**
 * Zod's issues in the seed's message shape, `<field>: <rule>; ...`, naming each field.
 * zod 4 leaves the input out of its issues, so whether a field is missing (rather than of
 * the wrong type) is read from the body itself.
 */
export function describeIssues(error: z.ZodError, body?: unknown): string {
  return error.issues
    .map((i) => {
      if (i.code === 'unrecognized_keys') return `unknown field(s): ${i.keys.join(', ')}`;
      if (i.path.length === 0 && i.code === 'invalid_type') return 'body: must be a JSON object';
      const field = i.path.map((k, n) => (typeof k === 'number' ? `[${k}]` : `${n > 0 ? '.' : ''}${String(k)}`)).join('');
      if (i.code === 'invalid_type' && body !== undefined && valueAt(body, i.path) === undefined) return `${field}: is required`;
      const rule = i.message.startsWith(`${field} `) ? i.message.slice(field.length + 1) : i.message;
      return `${field}: ${rule}`;
    })
    .join('; ');
}
