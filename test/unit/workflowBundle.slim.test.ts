import vm from 'node:vm';
import { slimWorkflowBundle } from '../../worker/bundleOptions';

const withMap = (code: string, map: object) =>
  `${code}\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}`;
const mapOf = (bundle: string) =>
  JSON.parse(Buffer.from(bundle.slice(bundle.indexOf('base64,', bundle.lastIndexOf('//# sourceMappingURL=')) + 7), 'base64').toString()) as Record<string, unknown>;

test('the slimmed bundle is ASCII, means the same, and keeps the source map without the sources\' text', () => {
  const code = [
    '// scheduled → started, zod says "أن يحوي"',
    'result = { arrow: "a → b", emoji: `😀 ${1 + 1}`, match: /[→]/.test("→"), astral: /😀/u.test("😀"), len: "😀".length };',
  ].join('\n');
  const map = { version: 3, file: 'bundle.js', sources: ['a.ts'], sourcesContent: ['const a = 1; // the whole file'], names: [], mappings: 'AAAA' };
  const slim = slimWorkflowBundle(withMap(code, map));

  expect(/[^\x00-\x7f]/.test(slim)).toBe(false);
  const run = (src: string) => {
    const ctx: { result?: unknown } = {};
    vm.runInNewContext(src, ctx);
    return ctx.result;
  };
  expect(run(slim)).toEqual(run(withMap(code, map)));
  expect(run(slim)).toEqual({ arrow: 'a → b', emoji: '😀 2', match: true, astral: true, len: 2 });
  const { sourcesContent, ...rest } = map;
  expect(sourcesContent).toBeDefined();
  expect(mapOf(slim)).toEqual(rest);
});

test('a bundle it could not rewrite safely is refused, not changed', () => {
  // `\→` is "→" in a string; `\\u2192` would be a backslash and "u2192".
  expect(() => slimWorkflowBundle(withMap('x = "\\→";', { version: 3, mappings: '' }))).toThrow(/non-ASCII/);
  expect(() => slimWorkflowBundle('x = 1;')).toThrow(/source map/);
});
