/**
 * What an operation's events mean to a person watching, as the CLI reads them
 * (cli/render/model.ts): the steps in the order they started (running, done with the
 * server's elapsed time, failed, or stopped when a step beside them failed), steps that run
 * side by side running together, each event read under its own step, each step's last lines of command output, and the closing facts
 * (VMID, IP, User). Plain data, so a page reload can keep it in sessionStorage.
 */
const OUTPUT_KEPT = 50;
const DONE = /^\[\+\] .* done \((\d+(?:\.\d+)?)s\)$/;
const WORKFLOW_ID = /^\[\*\] workflow id: (\S+)/;
const FACT = /^\[\*\] ([A-Za-z][\w ]*): (.+)$/;

const unmarked = (message) => message.replace(/^\[[*+-]\] /, '');

/**
 * The install's steps that run side by side, by their wire names: a copy of
 * `sideBySideSteps` in contract/steps.ts (the page has no bundler to import it;
 * test/unit/console.files.test.ts holds the two equal). Groups of branches: a branch's
 * steps run in turn, beside every other branch of its group.
 */
export const SIDE_BY_SIDE = [
  [['preparation > storage'], ['preparation > CPU baseline'], ['preparation > template', 'OS preparation > download', 'OS preparation > stage image'], ['SSH preparation > main node key']],
  [['VM initialization > wait for SSH'], ['VM initialization > init script']],
];

function besides(a, b) {
  return SIDE_BY_SIDE.some((group) => {
    const [ia, ib] = [a, b].map((name) => group.findIndex((branch) => branch.includes(name)));
    return ia >= 0 && ib >= 0 && ia !== ib;
  });
}

export function emptyModel() {
  return { steps: [], facts: [], headline: undefined, failure: undefined, lastId: 0, closed: false };
}

export function apply(model, e, now = Date.now()) {
  if (typeof e.id === 'number') model.lastId = e.id;
  if (WORKFLOW_ID.test(e.message) && e.step.endsWith('> workflow')) return;
  if (e.status === 'error') {
    const latest = model.steps.at(-1);
    const step = runningNamed(model, e.step) ?? (latest?.name === e.step ? latest : open(model, e.step, now));
    step.state = 'failed';
    step.error = unmarked(e.message);
    step.endedAt = now;
    model.failure = unmarked(e.message);
    // The steps beside it were cancelled with it.
    for (const other of model.steps.filter((s) => s.state === 'running')) Object.assign(other, { state: 'stopped', endedAt: now });
    return;
  }
  if (e.step.endsWith('> finalizing') && (e.status === 'success' || e.status === 'info')) {
    // The run is over: a step still open has ended.
    for (const step of model.steps.filter((s) => s.state === 'running')) end(step, now);
    const fact = FACT.exec(e.message);
    if (fact) model.facts.push([fact[1], fact[2]]);
    else {
      model.headline = unmarked(e.message);
      model.facts = [];
    }
    return;
  }
  const running = runningNamed(model, e.step);
  if (running) {
    if (!finished(running, e, now)) output(running, e.message);
    return;
  }
  // A notice about a step that has ended (`VMID 120, ...` after `qm create`): the page keeps none.
  if (endedNamed(model, e.step)) return;
  // A step's first event is its `[*] <doing>`; a relayed or late event opens it too.
  const step = open(model, e.step, now);
  if (e.message.startsWith('[*] ')) step.opening = unmarked(e.message);
  else if (!finished(step, e, now)) output(step, e.message);
}

/** `ssh user@ip` once the install has said both. */
export function sshLine(model) {
  const fact = (name) => model.facts.find(([k]) => k === name)?.[1];
  const ip = fact('IP');
  const user = fact('User');
  return ip && user ? `ssh ${user}@${ip}` : undefined;
}

function runningNamed(model, name) {
  return [...model.steps].reverse().find((s) => s.name === name && s.state === 'running');
}

/** The last step of that name, when every step started since runs beside it; a step of that name after others is a new one. */
function endedNamed(model, name) {
  const at = model.steps.map((s) => s.name).lastIndexOf(name);
  return at >= 0 && model.steps.slice(at + 1).every((s) => besides(s.name, name)) ? model.steps[at] : undefined;
}

function open(model, name, now) {
  // The steps before have ended, even without their `done`, unless they run beside this one.
  for (const before of model.steps.filter((s) => s.state === 'running' && !besides(s.name, name))) end(before, now);
  const step = { name, state: 'running', seenAt: now, output: [] };
  model.steps.push(step);
  return step;
}

/**
 * A step that ends without its `done`: one whose only event says what it decided (`no
 * reboot needed: …`) keeps that line as its note, as the CLI does.
 */
export function end(step, now) {
  if (step?.state !== 'running') return;
  step.state = 'done';
  step.endedAt = now;
  if (step.elapsedSec === undefined && step.opening !== undefined && step.output.length === 0) step.note = step.opening;
}

function finished(step, e, now) {
  const m = e.status === 'success' ? DONE.exec(e.message) : null;
  if (!m) return false;
  step.state = 'done';
  step.elapsedSec = Number(m[1]);
  step.endedAt = now;
  return true;
}

function output(step, message) {
  step.output.push(message.startsWith('[*] ') ? unmarked(message) : message);
  if (step.output.length > OUTPUT_KEPT) step.output.splice(0, step.output.length - OUTPUT_KEPT);
}
