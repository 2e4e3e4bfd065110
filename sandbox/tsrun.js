'use strict';
/**
 * Runs a TypeScript entry point of the sandbox: `node tsrun.js <entry.ts> [args...]`.
 *
 * Why not ts-node: every `qm` call of a test or of the service pays the start-up cost, and
 * ts-node costs ~300 ms more than plain node. Here each .ts file is transpiled once (types
 * are stripped, nothing is checked: `tsc` and the tests do that) and the JavaScript is kept
 * in a cache keyed by the file's content, so a warm call costs about as much as `node -e 0`
 * plus reading the cached files.
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');

const CACHE_DIRS = [
  path.join(__dirname, '..', 'node_modules', '.cache', 'qemurun-sandbox'),
  path.join(os.tmpdir(), 'qemurun-sandbox-cache'),
];

function transpile(source, filename) {
  try {
    // @swc/core comes with @temporalio/worker; it is loaded only on a cache miss.
    const swc = require('@swc/core');
    return swc.transformSync(source, {
      filename,
      swcrc: false,
      jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
      module: { type: 'commonjs' },
    }).code;
  } catch (err) {
    if (err && err.code !== 'MODULE_NOT_FOUND') throw err;
    const ts = require('typescript');
    return ts.transpileModule(source, {
      fileName: filename,
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
    }).outputText;
  }
}

function compiled(source, filename) {
  const key = crypto.createHash('sha1').update(filename).update('\0').update(source).digest('hex');
  for (const dir of CACHE_DIRS) {
    try {
      return fs.readFileSync(path.join(dir, `${key}.js`), 'utf8');
    } catch {
      // not cached there
    }
  }
  const code = transpile(source, filename);
  for (const dir of CACHE_DIRS) {
    try {
      fs.mkdirSync(dir, { recursive: true });
      // Concurrent first calls race here: write aside, then rename (atomic replace).
      const tmp = path.join(dir, `${key}.${process.pid}.tmp`);
      fs.writeFileSync(tmp, code);
      fs.renameSync(tmp, path.join(dir, `${key}.js`));
      break;
    } catch {
      // read-only location: try the next one
    }
  }
  return code;
}

require.extensions['.ts'] = function loadTs(module, filename) {
  module._compile(compiled(fs.readFileSync(filename, 'utf8'), filename), filename);
};

const entry = path.resolve(process.argv[2]);
// The entry sees `node <entry> args...`, as if it had been started directly.
process.argv.splice(1, 2, entry);
require(entry);
