'use strict';
/**
 * `npm run build`: compiles the Proxmox sandbox package (sandbox/ to sandbox/dist, which
 * sandbox mode loads and whose types the service's loader names), then the service's
 * TypeScript to dist/ with tsc, and prebuilds the workflow bundle (dist/workflow-bundle.js),
 * so the service starts with neither a TypeScript compiler nor webpack in its process.
 * dist/ holds the service only: neither the sandbox nor scripts/ (run from sources).
 *
 * `--if-stale` (npm's prestart and presandbox): builds only when dist/ or sandbox/dist is
 * missing or older than a source file, tsconfig or the lockfile. Plain JavaScript, so it
 * runs before anything is compiled.
 */
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');
const dist = path.join(root, 'dist');
const stamp = path.join(dist, '.build-stamp');
const sandbox = path.join(root, 'sandbox');
const SOURCE_DIRS = ['contract', 'app', 'lib', 'activities', 'workflows', 'api', 'cli', 'worker', 'sandbox'];
const SOURCE_FILES = ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json', 'sandbox/tsconfig.json', 'sandbox/package.json'];

function newestSourceMtime() {
  let newest = 0;
  const visit = (p) => {
    let st;
    try {
      st = fs.statSync(p);
    } catch {
      return;
    }
    if (st.isDirectory()) {
      for (const entry of fs.readdirSync(p)) if (entry !== 'node_modules' && entry !== 'dist') visit(path.join(p, entry));
    } else if (p.endsWith('.ts') || SOURCE_FILES.includes(path.relative(root, p))) {
      newest = Math.max(newest, st.mtimeMs);
    }
  };
  for (const f of fs.readdirSync(root)) if (f.endsWith('.ts')) visit(path.join(root, f));
  for (const d of [...SOURCE_DIRS, ...SOURCE_FILES]) visit(path.join(root, d));
  return newest;
}

function isStale() {
  try {
    return (
      fs.statSync(stamp).mtimeMs < newestSourceMtime() ||
      !fs.existsSync(path.join(dist, 'workflow-bundle.js')) ||
      !fs.existsSync(path.join(sandbox, 'dist', 'index.js'))
    );
  } catch {
    return true;
  }
}

async function build() {
  const started = Date.now();
  const tsc = (project) => execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', project], { cwd: root, stdio: 'inherit' });
  // First: the service's build reads the sandbox's declarations (app/sandbox.ts names its types).
  tsc(path.join(sandbox, 'tsconfig.json'));
  // A build from before the sandbox was a package of its own compiled it (and scripts/) into dist/.
  for (const stale of ['sandbox', 'scripts']) fs.rmSync(path.join(dist, stale), { recursive: true, force: true });
  tsc(path.join(root, 'tsconfig.build.json'));
  const { bundleWorkflowCode } = require('@temporalio/worker');
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(dist, 'workflows', 'index.js'),
    ...require(path.join(dist, 'worker', 'bundleOptions.js')).workflowBundlerOptions,
    logger: quietLogger(),
  });
  const { slimWorkflowBundle } = require(path.join(dist, 'worker', 'bundleOptions.js'));
  fs.writeFileSync(path.join(dist, 'workflow-bundle.js'), slimWorkflowBundle(code));
  fs.writeFileSync(stamp, new Date().toISOString() + '\n');
  console.log(`built dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** webpack's report is noise here; warnings and errors still show. */
function quietLogger() {
  const log = (level) => (message) => console.error(`workflow bundle ${level}: ${message}`);
  return { trace() {}, debug() {}, info() {}, warn: log('warning'), error: log('error'), log() {} };
}

async function main() {
  if (process.argv.includes('--if-stale') && !isStale()) return;
  if (process.argv.includes('--if-stale')) console.log('building dist/ (sources changed since the last build)');
  await build();
}

main().catch((err) => {
  console.error(err && err.message ? err.message : err);
  process.exit(1);
});
