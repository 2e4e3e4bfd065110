import { ApiError, getJson, post, readEvents, resumeEvents } from './api.js';
import { duration, h } from './dom.js';
import { apply, emptyModel, end, sshLine } from './progress.js';

/**
 * Install: a form made from the API's own description of the body (InstallBody in
 * /api/openapi.json), the API's 400 shown at the field it names, then the install's steps
 * as they happen. The steps seen so far and the last event id are kept in sessionStorage
 * under the workflow id, which the address names (`#install/<id>`): a reload re-attaches
 * with Last-Event-ID and continues where it was.
 */
const PRIMARY = ['os', 'version', 'name', 'node', 'cpu', 'ram', 'disk', 'pubkey', 'source'];
const TEXTAREAS = new Set(['pubkey', 'description', 'userData']);
/** Accepted by the API for the seed's clients, and ignored: nothing to ask. */
const SKIPPED = new Set(['gateway']);
const LABELS = { ram: 'ram (MB)', cpu: 'cpu (cores)', pubkey: 'SSH public key(s)', userData: 'cloud-init user-data', passwd: 'password' };
const stateKey = (id) => `qemurun.install.${id}`;

export function installView(main, session, workflowId) {
  const controller = new AbortController();
  if (workflowId) watch(main, workflowId, controller.signal);
  else if (!session.may('operate')) {
    main.append(h('h2', {}, 'Install a VM'), h('p', { className: 'notice' }, `Installing needs the operate role; this token has the ${session.who.role} role.`));
  } else form(main, controller.signal);
  return () => controller.abort();
}

async function form(main, signal) {
  main.append(h('h2', {}, 'Install a VM'));
  let schema;
  try {
    schema = (await getJson('/openapi.json')).components.schemas.InstallBody;
  } catch (err) {
    main.append(h('p', { className: 'error' }, `could not read the API's schema: ${err.message}`));
    return;
  }
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties).filter(([name]) => !SKIPPED.has(name));
  const formError = h('p', { className: 'error', 'data-error': 'form' });
  const el = h('form', { className: 'install', novalidate: true });
  const more = h('details', {}, h('summary', {}, 'More options: network, disks, storage, user-data…'));
  for (const [name, prop] of fields) (PRIMARY.includes(name) ? el : more).append(field(name, prop, required.has(name)));
  el.append(more, formError, h('button', { type: 'submit', className: 'primary' }, 'Install'));
  main.append(el);
  // The versions follow the OS (x-os-versions in the schema).
  const os = el.querySelector('[name="os"]');
  const version = el.querySelector('[name="version"]');
  const byOs = schema.properties.version['x-os-versions'] ?? {};
  const versions = () => version.replaceChildren(...(byOs[os.value] ?? []).map((v) => h('option', { value: v }, v)));
  os.addEventListener('change', versions);
  versions();
  version.value = (byOs[os.value] ?? []).at(-1) ?? '';

  el.addEventListener('submit', async (e) => {
    e.preventDefault();
    for (const x of el.querySelectorAll('.field-error')) x.textContent = '';
    formError.textContent = '';
    el.querySelector('button[type=submit]').disabled = true;
    try {
      const res = await post('/vm/install', bodyOf(el));
      const id = res.headers.get('X-Workflow-Id');
      history.replaceState(null, '', `#install/${encodeURIComponent(id)}`);
      main.replaceChildren();
      await follow(main, id, res, emptyModel(), signal);
    } catch (err) {
      el.querySelector('button[type=submit]').disabled = false;
      showRefusal(el, formError, err);
    }
  });
}

function field(name, prop, isRequired) {
  const label = `${LABELS[name] ?? name}${isRequired ? ' *' : ''}`;
  const help = prop.description && !prop['x-os-versions'] ? h('small', {}, prop.description) : null;
  const wrap = (control) => h('div', { className: 'field', 'data-field': name }, h('label', {}, label, control), help, h('span', { className: 'field-error', role: 'alert' }));
  if (prop['x-os-versions']) return wrap(h('select', { name }));
  if (prop.enum) {
    return wrap(h('select', { name }, isRequired ? null : h('option', { value: '' }, '(default)'), prop.enum.map((v) => h('option', { value: v }, v))));
  }
  if (prop.type === 'integer') return wrap(h('input', { name, type: 'number', step: 1, 'data-kind': 'integer' }));
  if (prop.type === 'array' && prop.items?.type === 'object') return disksField(name, prop);
  if (prop.type === 'array') return wrap(h('input', { name, 'data-kind': 'list', placeholder: 'comma-separated' }));
  if (prop.type === 'object') {
    return h(
      'fieldset',
      { className: 'field', 'data-field': name },
      h('legend', {}, name),
      Object.entries(prop.properties ?? {}).map(([child, p]) => field(`${name}.${child}`, p, false)),
      h('span', { className: 'field-error', role: 'alert' }),
    );
  }
  if (TEXTAREAS.has(name)) return wrap(h('textarea', { name, rows: name === 'userData' ? 6 : 3 }));
  return wrap(h('input', { name, type: name === 'passwd' ? 'password' : 'text', autocomplete: 'off' }));
}

/** Extra disks: one row per disk, each field named as the API names it (`disks[0].size`). */
function disksField(name, prop) {
  const rows = h('div', { className: 'rows' });
  const add = () => {
    const i = rows.children.length;
    rows.append(
      h('div', { className: 'row' }, Object.entries(prop.items.properties).map(([child, p]) => field(`${name}[${i}].${child}`, p, (prop.items.required ?? []).includes(child)))),
    );
  };
  return h(
    'fieldset',
    { className: 'field', 'data-field': name },
    h('legend', {}, name),
    rows,
    h('button', { type: 'button', onclick: add }, 'Add a disk'),
    h('span', { className: 'field-error', role: 'alert' }),
  );
}

/** The body: only what was filled in, each value in its schema's type. */
function bodyOf(el) {
  const body = {};
  for (const input of el.querySelectorAll('[name]')) {
    const raw = input.value.trim();
    if (raw === '') continue;
    const value = input.dataset.kind === 'integer' ? Number(raw) : input.dataset.kind === 'list' ? raw.split(/[\s,]+/).filter(Boolean) : input.name === 'userData' || input.name === 'pubkey' ? input.value : raw;
    setPath(body, input.name, value);
  }
  return body;
}

function setPath(obj, path, value) {
  const keys = path.split(/\.|\[(\d+)\]\.?/).filter((k) => k !== undefined && k !== '');
  let at = obj;
  keys.forEach((k, n) => {
    if (n === keys.length - 1) at[k] = value;
    else at = at[k] ??= /^\d+$/.test(keys[n + 1]) ? [] : {};
  });
}

/** The API's `please check your input: <field>: <rule>; …`, each rule shown at its field. */
function showRefusal(el, formError, err) {
  const message = err.message ?? String(err);
  const problems = err instanceof ApiError && err.status === 400 ? message.replace(/^please check your input: /, '').split(/; (?=[\w.[\]]+: )/) : [message];
  for (const p of problems) {
    const m = /^([\w.[\]]+): (.*)$/.exec(p);
    const target = m && closestField(el, m[1]);
    if (target) target.querySelector(':scope > .field-error').textContent = m[2];
    else formError.textContent = formError.textContent ? `${formError.textContent}; ${p}` : p;
  }
  el.querySelector('.field-error:not(:empty)')?.closest('details')?.setAttribute('open', '');
}

/** The field the API named, else the nearest one holding it (`dns.servers[1]` → `dns.servers`). */
function closestField(el, name) {
  const byName = new Map([...el.querySelectorAll('[data-field]')].map((f) => [f.dataset.field, f]));
  for (let n = name; n; ) {
    if (byName.has(n)) return byName.get(n);
    const shorter = n.replace(/(\.[^.[\]]+|\[\d+\])$/, '');
    n = shorter === n ? '' : shorter;
  }
  return undefined;
}

async function watch(main, workflowId, signal) {
  const saved = sessionStorage.getItem(stateKey(workflowId));
  const model = saved ? JSON.parse(saved) : emptyModel();
  try {
    if (model.closed) return render(main, workflowId, model);
    const res = await resumeEvents(workflowId, model.lastId, signal);
    await follow(main, workflowId, res, model, signal);
  } catch (err) {
    if (signal.aborted) return;
    render(main, workflowId, model);
    main.append(h('p', { className: 'error' }, `could not follow ${workflowId}: ${err.message}`));
  }
}

async function follow(main, workflowId, res, model, signal) {
  render(main, workflowId, model);
  const tick = setInterval(() => render(main, workflowId, model), 1000);
  signal.addEventListener('abort', () => clearInterval(tick), { once: true });
  try {
    const closed = await readEvents(
      res,
      (e) => {
        apply(model, e);
        sessionStorage.setItem(stateKey(workflowId), JSON.stringify(model));
        render(main, workflowId, model);
      },
      signal,
    );
    model.closed = closed;
    // A step that ends without a `done` line (a reboot not needed) ended with the operation.
    if (closed && !model.failure) for (const s of model.steps) end(s, Date.now());
    sessionStorage.setItem(stateKey(workflowId), JSON.stringify(model));
  } finally {
    clearInterval(tick);
  }
  render(main, workflowId, model);
}

function render(main, workflowId, model) {
  const now = Date.now();
  const steps = model.steps.map((s) =>
    h(
      'li',
      { className: `step ${s.state}`, 'data-step': s.name },
      h('span', { className: 'mark' }, s.state === 'done' ? '✓' : s.state === 'failed' ? '✗' : s.state === 'stopped' ? '■' : '…'),
      h('span', { className: 'name' }, s.name),
      h('span', { className: 'time' }, s.state === 'done' ? (s.elapsedSec !== undefined ? `${s.elapsedSec}s` : s.endedAt ? duration(s.endedAt - s.seenAt) : '') : s.state === 'running' ? duration(now - s.seenAt) : ''),
      s.error ? h('div', { className: 'error' }, s.error) : null,
      s.note ? h('div', { className: 'note' }, s.note) : null,
      s.output.length > 0 && (s.state === 'running' || s.name.endsWith('init script')) ? h('pre', { className: 'output' }, s.output.slice(-12).join('\n')) : null,
    ),
  );
  const ssh = sshLine(model);
  const end = model.failure
    ? h('p', { className: 'error', 'data-outcome': 'failed' }, `Failed: ${model.failure}`)
    : ssh
      ? h(
          'div',
          { className: 'done', 'data-outcome': 'done' },
          h('p', {}, model.headline ?? 'Installed'),
          h('code', { className: 'ssh' }, ssh),
          h('button', { type: 'button', onclick: () => navigator.clipboard?.writeText(ssh) }, 'Copy'),
          ' ',
          h('a', { href: `#timeline/${encodeURIComponent(workflowId)}` }, 'where the time went'),
        )
      : model.closed
        ? h('p', {}, 'The stream ended.')
        : null;
  main.replaceChildren(...[h('h2', {}, 'Install ', h('code', {}, workflowId)), h('ol', { className: 'steps' }, steps), end].filter(Boolean));
}
