/**
 * What an operation's events mean to a person watching, as the CLI reads them
 * (cli/render/model.ts): the steps in order (running, done with the server's elapsed
 * time, or failed), each step's last lines of command output, and the closing facts
 * (VMID, IP, User). Plain data, so a page reload can keep it in sessionStorage.
 */
const OUTPUT_KEPT = 50;
const DONE = /^\[\+\] .* done \((\d+(?:\.\d+)?)s\)$/;
const WORKFLOW_ID = /^\[\*\] workflow id: (\S+)/;
const FACT = /^\[\*\] ([A-Za-z][\w ]*): (.+)$/;

const unmarked = (message) => message.replace(/^\[[*+-]\] /, '');

export function emptyModel() {
  return { steps: [], facts: [], headline: undefined, failure: undefined, lastId: 0, closed: false };
}

export function apply(model, e, now = Date.now()) {
  if (typeof e.id === 'number') model.lastId = e.id;
  if (WORKFLOW_ID.test(e.message) && e.step.endsWith('> workflow')) return;
  const latest = model.steps.at(-1);
  if (e.status === 'error') {
    const step = latest?.name === e.step ? latest : open(model, e.step, now);
    step.state = 'failed';
    step.error = unmarked(e.message);
    step.endedAt = now;
    model.failure = unmarked(e.message);
    return;
  }
  if (e.step.endsWith('> finalizing') && (e.status === 'success' || e.status === 'info')) {
    // The run is over: a step still open has ended.
    end(latest, now);
    const fact = FACT.exec(e.message);
    if (fact) model.facts.push([fact[1], fact[2]]);
    else {
      model.headline = unmarked(e.message);
      model.facts = [];
    }
    return;
  }
  if (latest?.name !== e.step) {
    // A step's first event is its `[*] <doing>`; a relayed or late event opens it too.
    const step = open(model, e.step, now);
    if (e.message.startsWith('[*] ')) step.opening = unmarked(e.message);
    else if (!finished(step, e, now)) output(step, e.message);
    return;
  }
  if (latest.state !== 'running') return;
  if (!finished(latest, e, now)) output(latest, e.message);
}

/** `ssh user@ip` once the install has said both. */
export function sshLine(model) {
  const fact = (name) => model.facts.find(([k]) => k === name)?.[1];
  const ip = fact('IP');
  const user = fact('User');
  return ip && user ? `ssh ${user}@${ip}` : undefined;
}

function open(model, name, now) {
  end(model.steps.at(-1), now);
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
