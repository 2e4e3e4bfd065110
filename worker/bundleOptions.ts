/**
 * How the workflow code is bundled, the same for `npm run build`, a worker that bundles at
 * start-up and the tests.
 *
 * The worker runs every workflow in one V8 context and gives each run its own copy of the
 * bundle's modules. zod (the input checks every workflow makes) is about 3 MB of objects a
 * copy; preloaded (../workflows/preload), one instance is shared by all runs.
 */
export const workflowBundlerOptions = {
  preloadModules: [require.resolve('../workflows/preload')],
  // Refused payloads fail their workflow at once (workflows/interceptors.ts).
  workflowInterceptorModules: [require.resolve('../workflows/interceptors')],
};

const INLINE_SOURCE_MAP = '//# sourceMappingURL=data:';

/**
 * The bundle as the worker holds it: its main thread and its workflow thread each keep the
 * code as one string and the source map as objects. Two things made that 26 MB instead of
 * ~8 MB:
 * - a single character outside Latin-1 (an arrow in a comment, zod's Arabic messages) makes
 *   V8 store the whole 4.5 MB string with two bytes a character; written as `\uXXXX`
 *   escapes, which mean the same in JavaScript source, it takes one;
 * - the source map carried every module's source text (`sourcesContent`, 1.6 MB), which
 *   mapping a stack trace to its file and line does not use.
 */
export function slimWorkflowBundle(bundle: string): string {
  const at = bundle.lastIndexOf(INLINE_SOURCE_MAP);
  if (at < 0) throw new Error('the workflow bundle has no inline source map');
  const code = bundle.slice(0, at);
  // `\` then the character would turn into a literal backslash and `uXXXX`: refuse, loudly.
  if (/\\[^\x00-\x7f]/.test(code)) throw new Error('the workflow bundle escapes a non-ASCII character; it cannot be rewritten as \\u escapes');
  const base64 = bundle.indexOf('base64,', at);
  if (base64 < 0) throw new Error('the workflow bundle\'s inline source map is not base64');
  const map = JSON.parse(Buffer.from(bundle.slice(base64 + 'base64,'.length).trim(), 'base64').toString('utf8')) as { sourcesContent?: unknown };
  delete map.sourcesContent;
  const ascii = code.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `${ascii}${bundle.slice(at, base64 + 'base64,'.length)}${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
}
