import { getJson, post } from './api.js';
import { h } from './dom.js';

/**
 * Templates (current or stale, and a build where the role allows), rebuild schedules with
 * their next runs, and address pools with their leases: what the API lists, as tables.
 */
function catalogReload(main, session) {
  main.replaceChildren();
  catalogView(main, session);
}

export function catalogView(main, session) {
  const sections = [
    { title: 'Templates', path: '/templates', rows: (a) => a.templates, extra: templateBuild, role: 'operate' },
    { title: 'Rebuild schedules', path: '/schedules', rows: (a) => a.schedules, extra: scheduleAdd, role: 'admin' },
    { title: 'Address pools', path: '/address-pools', rows: (a) => a.pools, detail: (pool) => pool.leases },
  ];
  for (const s of sections) {
    const section = h('section', { 'data-section': s.path.slice(1) }, h('h2', {}, s.title));
    main.append(section);
    getJson(s.path)
      .then((answer) => {
        const rows = s.rows(answer) ?? [];
        section.append(rows.length === 0 ? h('p', {}, 'none') : table(rows));
        if (s.detail) for (const r of rows) if (s.detail(r)?.length) section.append(h('h3', {}, `${r.name}: leases`), table(s.detail(r)));
        if (s.extra && session.may(s.role)) section.append(s.extra(() => catalogReload(main, session)));
      })
      .catch((err) => section.append(h('p', { className: 'error' }, err.message)));
  }
}

function cell(v) {
  if (v === null || v === undefined) return '';
  if (Array.isArray(v)) return v.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(', ');
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function table(rows) {
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))].filter((c) => c !== 'leases' && c !== 'spec');
  return h(
    'table',
    {},
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', {}, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, columns.map((c) => h('td', {}, cell(r[c])))))),
  );
}

/** Builds a template of an OS version now (the operate role), and links to its progress. */
function templateBuild() {
  const os = h('select', { name: 'os' });
  const version = h('select', { name: 'version' });
  const note = h('p', { role: 'status' });
  getJson('/openapi.json').then((doc) => {
    const byOs = doc.components.schemas.InstallBody.properties.version['x-os-versions'] ?? {};
    os.replaceChildren(...Object.keys(byOs).map((o) => h('option', { value: o }, o)));
    const versions = () => version.replaceChildren(...(byOs[os.value] ?? []).map((v) => h('option', { value: v }, v)));
    os.addEventListener('change', versions);
    versions();
  });
  const form = h('form', { className: 'inline' }, h('label', {}, 'os ', os), h('label', {}, 'version ', version), h('button', { type: 'submit' }, 'Build template'), note);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const answer = await post('/templates', { os: os.value, version: version.value });
      note.replaceChildren(answer.started ? 'Building: ' : 'Already building: ', h('a', { href: `#install/${encodeURIComponent(answer.workflowId)}` }, answer.workflowId));
    } catch (err) {
      note.textContent = err.message;
    }
  });
  return form;
}

/** Adds a rebuild schedule of a managed VM (the admin role): its recorded spec, on a cron. */
function scheduleAdd(reload) {
  const vmid = h('input', { name: 'vmid', type: 'number', placeholder: 'VMID' });
  const cron = h('input', { name: 'cron', placeholder: 'cron, e.g. 0 3 * * *' });
  const note = h('input', { name: 'note', placeholder: 'note' });
  const problem = h('p', { className: 'error', role: 'alert' });
  const form = h('form', { className: 'inline', 'data-form': 'schedule' }, vmid, cron, note, h('button', { type: 'submit' }, 'Add schedule'), problem);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    problem.textContent = '';
    try {
      await post('/schedules', { vmid: Number(vmid.value), cron: cron.value.trim(), ...(note.value.trim() ? { note: note.value.trim() } : {}) });
      reload();
    } catch (err) {
      problem.textContent = err.message;
    }
  });
  return form;
}
