import fs from 'node:fs';
import path from 'node:path';

/**
 * What the docs and comments say about the tree, checked against the tree: a count, a list
 * or a layout that is written in two places goes stale in one of them unnoticed.
 */

const ROOT = path.join(__dirname, '..', '..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
const docs = () => ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

const jestConfig = require(path.join(ROOT, 'jest.config.js')) as { projects: Array<{ displayName: string }> };

const NUMBERS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];

test('every count of the jest projects is the number jest.config.js has', () => {
  const count = jestConfig.projects.length;
  const wrong = [...docs(), 'jest.config.js'].flatMap((file) =>
    [...read(file).matchAll(/\b(\w+) (?:jest )?projects\b/gi)]
      .filter((m) => NUMBERS.includes(m[1].toLowerCase()) && NUMBERS.indexOf(m[1].toLowerCase()) !== count)
      .map((m) => `${file}: "${m[0]}" (there are ${count})`),
  );
  expect(wrong).toEqual([]);
});

test('the API-mode suites are listed once, in jest.config.js, and the docs point to it', () => {
  const list = /const apiModeSuites = \[([^\]]*)\]/.exec(read('jest.config.js'))?.[1] ?? '';
  const suites = [...list.matchAll(/'([^']+)'/g)].map((m) => m[1]);
  expect(suites.length).toBeGreaterThan(0);
  // A paragraph that names most of the suites is a copy of the list, which goes stale.
  const copies = docs().flatMap((file) =>
    read(file).split(/\n\s*\n/)
      .filter((para) => suites.filter((s) => para.includes(`\`${s}\``)).length >= 3)
      .map((para) => `${file}: ${para.slice(0, 80).replace(/\n/g, ' ')}…`),
  );
  expect(copies).toEqual([]);
  const pointers = docs().filter((file) => read(file).includes('`apiModeSuites`'));
  expect(pointers).toEqual(expect.arrayContaining(['docs/development.md', 'docs/proxmox-api.md']));
});

test("development.md's layout names every file of activities/ and workflows/", () => {
  const text = read('docs/development.md');
  const layout = text.slice(text.indexOf('## Layout'));
  const bullet = (folder: string) => layout.slice(layout.indexOf(`- \`${folder}/\``)).split(/\n {2}- /)[0];
  const missing = ['activities', 'workflows'].flatMap((folder) =>
    fs.readdirSync(path.join(ROOT, folder)).filter((f) => f.endsWith('.ts'))
      .filter((f) => !bullet(folder).includes(`\`${f}\``))
      .map((f) => `${folder}/${f}`),
  );
  expect(missing).toEqual([]);
});

test('keepAlive.ts names every activity file that heartbeats by itself', () => {
  const comment = read('activities/keepAlive.ts');
  const beating = fs.readdirSync(path.join(ROOT, 'activities'))
    .filter((f) => f.endsWith('.ts') && f !== 'keepAlive.ts')
    .filter((f) => /\.heartbeat\(/.test(read(`activities/${f}`)));
  expect(beating.length).toBeGreaterThan(0);
  expect(beating.filter((f) => !comment.includes(f.replace(/\.ts$/, '')))).toEqual([]);
});

const PRODUCT = ['lib', 'activities', 'workflows', 'api', 'worker', 'contract', 'cli', 'app', 'sandbox', 'scripts'];

function productFiles(dir: string = ROOT, folders: string[] = PRODUCT): string[] {
  return folders.flatMap((folder) => {
    const full = path.join(dir, folder);
    if (!fs.existsSync(full)) return [];
    return fs.readdirSync(full, { withFileTypes: true }).flatMap((e) => {
      const rel = path.join(folder, e.name);
      if (e.isDirectory()) return e.name === 'node_modules' || rel === path.join('sandbox', 'dist') ? [] : productFiles(dir, [rel]);
      return /\.(ts|js|mjs)$/.test(e.name) ? [rel] : [];
    });
  });
}

test('each doc comment in product code sits on what it documents, not on another doc comment', () => {
  const stacked = productFiles().flatMap((file) => {
    const lines = read(file).split('\n');
    return lines.flatMap((line, i) => (i > 0 && /\*\/\s*$/.test(lines[i - 1]) && /^\s*\/\*\*/.test(line) ? [`${file}:${i + 1}`] : []));
  });
  expect(stacked).toEqual([]);
});

test('product code cites no issue numbers: a reader of the repository cannot follow them', () => {
  const cited = productFiles().flatMap((file) =>
    read(file).split('\n').flatMap((line, i) => (/\bissues? #?\d+/i.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
  );
  expect(cited).toEqual([]);
});

test('scripts/ imports nothing from test/: the tests import the scripts they test, not the reverse', () => {
  const fromTest = productFiles(ROOT, ['scripts']).flatMap((file) =>
    [...read(file).matchAll(/(?:from |require\()['"]([^'"]+)['"]/g)]
      .filter((m) => m[1].startsWith('.') && path.resolve(ROOT, path.dirname(file), m[1]).startsWith(path.join(ROOT, 'test') + path.sep))
      .map((m) => `${file} imports ${m[1]}`),
  );
  expect(fromTest).toEqual([]);
});

test('performance.md opens with the current figures, each copied from its history below', () => {
  const text = read('docs/performance.md');
  const sections = [...text.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
  expect(sections.slice(0, 2)).toEqual(['Current figures', 'History']);
  const current = text.slice(text.indexOf('## Current figures'), text.indexOf('## History'));
  const history = text.slice(text.indexOf('## History'));
  expect(current).toContain('npm run bench');
  const figures = [...current.matchAll(/\d[\d,.]*(?:\.\d+)?/g)].map((m) => m[0].replace(/[.,]$/, ''));
  expect(figures.filter((n) => !history.includes(n))).toEqual([]);
});

test("the lint section says why max-len is off, and eslint.config.mjs keeps it off", () => {
  const text = read('docs/development.md');
  const lint = text.slice(text.indexOf('## Lint'), text.indexOf('\n## ', text.indexOf('## Lint') + 1));
  expect(lint).toMatch(/`max-len`/);
  expect(lint).toMatch(/formatter/);
  expect(read('eslint.config.mjs')).not.toMatch(/['"]max-len['"]\s*:\s*\[?\s*['"]?(error|warn|1|2)/);
});
