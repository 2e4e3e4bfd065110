'use strict';
/**
 * Where a test run's time went: a table of its stages and the ten slowest test files, read
 * from jest's own JSON results (test-results/<suite>.json, which scripts/test.js writes).
 *
 *   node scripts/test-times.js <stages.tsv> [test-results/]
 *
 * A stage is one line of the TSV file: name, seconds, status. `.ci/run` appends its own
 * (set-up, type check, lint, build) and scripts/test.js one per jest suite, through the
 * file QEMURUN_TEST_TIMES names; a stage that ran beside others says so in its name.
 */
const fs = require('node:fs');
const path = require('node:path');

/** Appends a stage to QEMURUN_TEST_TIMES, when set. */
function appendStage(stage, seconds, status) {
  const file = process.env.QEMURUN_TEST_TIMES;
  if (!file) return;
  fs.appendFileSync(file, `${stage}\t${seconds.toFixed(1)}\t${status}\n`);
}

function readStages(file) {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [stage, seconds, status] = line.split('\t');
      return { stage, seconds: Number(seconds), status };
    });
}

/** Every test file of every suite's JSON results: project, file, seconds, tests, status. */
function testFiles(resultsDir) {
  if (!fs.existsSync(resultsDir)) return [];
  return fs
    .readdirSync(resultsDir)
    .filter((f) => f.endsWith('.json'))
    .flatMap((f) => {
      let results;
      try {
        results = JSON.parse(fs.readFileSync(path.join(resultsDir, f), 'utf8'));
      } catch {
        return [];
      }
      const suite = f.replace(/\.json$/, '');
      return (results.testResults ?? []).map((r) => ({
        suite,
        file: path.relative(path.resolve(__dirname, '..'), r.name),
        seconds: (r.endTime - r.startTime) / 1000,
        tests: (r.assertionResults ?? []).length,
        status: r.status,
      }));
    });
}

const pad = (s, n) => String(s).padEnd(n);
const padLeft = (s, n) => String(s).padStart(n);
const fmt = (seconds) => {
  const s = Math.round(seconds);
  return s >= 60 ? `${s} s (${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s)` : `${s} s`;
};

function printTimes(resultsDir, stages) {
  const files = testFiles(resultsDir);
  const lines = ['', '== where the time went'];
  const w = Math.max(5, ...stages.map((s) => s.stage.length));
  lines.push(`${pad('stage', w)}  ${padLeft('time', 16)}  result`);
  for (const s of stages) lines.push(`${pad(s.stage, w)}  ${padLeft(fmt(s.seconds), 16)}  ${s.status}`);
  const bySuite = new Map();
  for (const f of files) {
    const t = bySuite.get(f.suite) ?? { files: 0, tests: 0, seconds: 0 };
    bySuite.set(f.suite, { files: t.files + 1, tests: t.tests + f.tests, seconds: t.seconds + f.seconds });
  }
  if (bySuite.size) {
    lines.push('', 'suite        files  tests  sum of file times');
    for (const [suite, t] of bySuite) lines.push(`${pad(suite, 11)}  ${padLeft(t.files, 5)}  ${padLeft(t.tests, 5)}  ${fmt(t.seconds)}`);
  }
  const slowest = [...files].sort((a, b) => b.seconds - a.seconds).slice(0, 10);
  if (slowest.length) {
    lines.push('', 'ten slowest test files');
    const fw = Math.max(...slowest.map((f) => f.file.length));
    for (const f of slowest) lines.push(`${padLeft(fmt(f.seconds), 16)}  ${pad(f.suite, 9)}  ${pad(f.file, fw)}  ${f.tests} tests${f.status === 'passed' ? '' : `, ${f.status}`}`);
  }
  console.log(lines.join('\n'));
}

module.exports = { appendStage, printTimes, readStages };

if (require.main === module) {
  const [stagesFile, resultsDir = path.resolve(__dirname, '..', 'test-results')] = process.argv.slice(2);
  if (!stagesFile) {
    console.error('usage: node scripts/test-times.js <stages.tsv> [test-results/]');
    process.exit(2);
  }
  printTimes(resultsDir, readStages(stagesFile));
}
