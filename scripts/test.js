'use strict';
/**
 * `npm test`: every jest project, the slow ones side by side, then a table of where the
 * time went.
 *
 *   node scripts/test.js                  all suites
 *   node scripts/test.js e2e api-mode     some of them (names below); `guests`, `api-mode` and
 *                                         `e2e-kill` beside when another suite runs too
 *   node scripts/test.js e2e -- -t cancel  anything after `--` goes to every jest run
 *
 * Three lanes share the machine: the `guests` suite (real guests under TCG), then the API-mode
 * pass, run in one, beside the other suites in the next, so the two longest stretches of
 * the run overlap instead of adding up (each pass has its own Temporal dev server, and its
 * files their own namespaces). The third holds `e2e-kill`, the one end-to-end file that
 * kills the worker at each step: it spends its minutes waiting out heartbeat timeouts, not
 * on the cores, so it waits beside everything else (with it, `e2e` leaves that file out).
 * The output of the lanes run beside is kept in test-results/<suite>.log and printed when
 * the rest is done. Each suite writes jest's JSON results to
 * test-results/<suite>.json, which the table (and .ci/run's, through QEMURUN_TEST_TIMES)
 * reads.
 */
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { appendStage, printTimes } = require('./test-times');

const root = path.resolve(__dirname, '..');
const jestBin = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');

const KILL_FILE = 'test/e2e/production\\.kill\\.e2e\\.test\\.ts$';

/** Each suite: its jest projects and how its files share the machine. */
const SUITES = {
  // Pure code: two workers, as many as the machine has cores.
  unit: { projects: ['unit'], args: ['-w', '2'] },
  // The sandbox and the product's Proxmox clients, no Temporal: files share nothing.
  proxmox: { projects: ['proxmox'], args: ['-w', '2'] },
  // One time-skipping server per file, one file at a time: each is a JVM.
  workflows: { projects: ['workflow'], args: ['--runInBand'] },
  // One dev server for the run; each file its own namespace, one file at a time.
  e2e: { projects: ['e2e'], args: ['--runInBand'] },
  'api-mode': { projects: ['api-mode'], args: ['--runInBand'], beside: 'side' },
  guests: { projects: ['guests'], args: ['--runInBand'], beside: 'side' },
  // One e2e file, mostly idle (heartbeat timeouts): a lane of its own, its own dev server.
  'e2e-kill': { projects: ['e2e'], args: ['--runInBand', '--testPathPatterns', KILL_FILE], beside: 'own' },
};
const ALL = ['guests', 'api-mode', 'e2e-kill', 'unit', 'proxmox', 'workflows', 'e2e'];

function parseArgs(argv) {
  const dash = argv.indexOf('--');
  const names = dash === -1 ? argv : argv.slice(0, dash);
  const extra = dash === -1 ? [] : argv.slice(dash + 1);
  const unknown = names.filter((n) => !SUITES[n]);
  if (unknown.length) {
    console.error(`unknown suite ${unknown.join(', ')}: one of ${Object.keys(SUITES).join(', ')}`);
    process.exit(2);
  }
  return { names: names.length ? names : ALL, extra };
}

/** Runs one suite's jest; resolves with its exit code. Output goes to `log` when given. */
function runSuite(name, extra, resultsDir, log, skipKillFile) {
  const suite = SUITES[name];
  const args = [
    jestBin,
    '--selectProjects', ...suite.projects,
    ...suite.args,
    ...(name === 'e2e' && skipKillFile ? ['--testPathIgnorePatterns', KILL_FILE] : []),
    '--json', '--outputFile', path.join(resultsDir, `${name}.json`),
    ...extra,
  ];
  const out = log ? fs.openSync(log, 'w') : 'inherit';
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', out, out] });
    child.on('exit', (code, signal) => {
      if (typeof out === 'number') fs.closeSync(out);
      const seconds = (Date.now() - started) / 1000;
      const status = code === 0 ? 'passed' : `failed (${signal ?? `exit ${code}`})`;
      appendStage(`jest ${name}`, seconds, status);
      resolve({ name, code: code ?? 1, seconds, status });
    });
  });
}

async function main() {
  const { names, extra } = parseArgs(process.argv.slice(2));
  const resultsDir = path.join(root, 'test-results');
  fs.mkdirSync(resultsDir, { recursive: true });
  for (const n of names) fs.rmSync(path.join(resultsDir, `${n}.json`), { force: true });

  // Lanes beside only when something else runs meanwhile; otherwise suites stream as usual.
  const beside = names.some((n) => !SUITES[n].beside) ? names.filter((n) => SUITES[n].beside) : [];
  const skipKillFile = names.includes('e2e-kill');
  // Each lane's suites run one after another, as listed: the side lane's in one, each
  // `own` suite in a lane of its own.
  const lane = (suites) => (async () => {
    const done = [];
    for (const n of suites) {
      const log = path.join(resultsDir, `${n}.log`);
      console.log(`== ${n}: started beside the other suites; its output is in ${path.relative(root, log)}, printed at the end`);
      const r = await runSuite(n, extra, resultsDir, log, skipKillFile);
      console.log(`== ${n}: ${r.status} after ${Math.round(r.seconds)} s`);
      done.push({ ...r, log });
    }
    return done;
  })();
  const lanes = [lane(beside.filter((n) => SUITES[n].beside === 'side')), ...beside.filter((n) => SUITES[n].beside === 'own').map((n) => lane([n]))];

  const results = [];
  for (const n of names.filter((x) => !beside.includes(x))) {
    console.log(`== ${n}`);
    results.push(await runSuite(n, extra, resultsDir, undefined, skipKillFile));
  }
  if (beside.length) console.log(`== waiting for ${beside.join(', ')}`);
  for (const r of (await Promise.all(lanes)).flat()) {
    console.log(`== ${r.name} (run beside the others): its output`);
    process.stdout.write(fs.readFileSync(r.log, 'utf8'));
    results.push(r);
  }

  // .ci/run prints one table at its end, with its own stages in it.
  if (!process.env.QEMURUN_TEST_TIMES) printTimes(resultsDir, results.map((r) => ({ stage: `jest ${r.name}`, seconds: r.seconds, status: r.status })));
  const failed = results.filter((r) => r.code !== 0);
  if (failed.length) console.log(`failed: ${failed.map((r) => r.name).join(', ')}`);
  process.exit(failed.length ? 1 : 0);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
