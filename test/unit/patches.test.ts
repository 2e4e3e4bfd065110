import fs from 'node:fs';
import path from 'node:path';

const root = path.join(__dirname, '..', '..');
const workflowsDir = path.join(root, 'workflows');

/** Every patch id the workflow code passes to `patched` or `deprecatePatch`, by constant or literal. */
function patchIdsInCode(): string[] {
  const ids = new Set<string>();
  for (const file of fs.readdirSync(workflowsDir).filter((f) => f.endsWith('.ts'))) {
    const text = fs.readFileSync(path.join(workflowsDir, file), 'utf8');
    const constants = new Map([...text.matchAll(/const ([A-Z_]+) = '([^']+)';/g)].map((m) => [m[1], m[2]]));
    for (const m of text.matchAll(/\b(?:patched|deprecatePatch)\(([^)]+)\)/g)) {
      const arg = m[1].trim();
      const literal = /^'([^']+)'$/.exec(arg);
      const id = literal ? literal[1] : constants.get(arg);
      if (id === undefined) throw new Error(`${file}: patch id ${arg} is not a constant of that file or a literal`);
      ids.add(id);
    }
  }
  return [...ids].sort();
}

/** The first column of the table under "The patches today" in docs/versioning.md. */
function patchIdsInPolicy(): string[] {
  const doc = fs.readFileSync(path.join(root, 'docs', 'versioning.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## The patches today'));
  return [...section.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]).sort();
}

test('docs/versioning.md lists every patch the workflows use, and no other, with where it stands', () => {
  expect(patchIdsInCode().length).toBeGreaterThan(0);
  expect(patchIdsInPolicy()).toEqual(patchIdsInCode());
});
