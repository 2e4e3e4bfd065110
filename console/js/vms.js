import { getJson, post, readEvents } from './api.js';
import { age, confirmAction, h } from './dom.js';

/** How often the open page re-reads the list: the page asks, the server polls nothing. */
const REFRESH_MS = 5000;

/** What each operation needs: the power state it acts on, and whether it streams. */
const ACTIONS = [
  { op: 'start', label: 'Start', when: (vm) => !vm.running },
  { op: 'stop', label: 'Stop', when: (vm) => vm.running },
  { op: 'reboot', label: 'Reboot', when: (vm) => vm.running },
  { op: 'rebuild', label: 'Rebuild', when: () => true, confirm: (vm) => `Rebuild VM ${vm.vmid} (${vm.name})? It is destroyed and re-created from its recorded spec; its disks' contents are lost.` },
  { op: 'destroy', label: 'Destroy', when: (vm) => !vm.running, confirm: (vm) => `Destroy VM ${vm.vmid} (${vm.name})? Its disks are purged; this cannot be undone.` },
];

function temporalUiLink(temporalUi, run) {
  const base = `${location.protocol}//${location.hostname}:${temporalUi.port}`;
  return `${base}/namespaces/${encodeURIComponent(temporalUi.namespace)}/workflows/${encodeURIComponent(run.workflowId)}/${encodeURIComponent(run.runId)}/history`;
}

export function vmsView(main, session) {
  const status = h('p', { className: 'status', role: 'status' });
  const body = h('tbody');
  const table = h(
    'table',
    { className: 'vms' },
    h('thead', {}, h('tr', {}, ['VMID', 'Name', 'Status', 'Node', 'IP', 'OS', 'Owner', 'Age', ''].map((t) => h('th', {}, t)))),
    body,
  );
  main.append(h('h2', {}, 'Virtual machines'), status, table);

  /** Per VMID: its runs (owner, age, IP of its last install), read once; a change reads them again. */
  const runsOf = new Map();
  const open = new Set();
  const notes = new Map();
  let timer;
  let stopped = false;

  async function runsFor(vmid) {
    if (!runsOf.has(vmid)) {
      runsOf.set(
        vmid,
        (async () => {
          const answer = await getJson(`/vm/${vmid}/runs`);
          const built = answer.runs.find((r) => (r.type === 'installVm' || r.type === 'vmRebuild') && r.status === 'COMPLETED');
          const install = answer.runs.find((r) => r.type === 'installVm');
          const status = built ? await getJson(`/workflows/${encodeURIComponent(built.workflowId)}`).catch(() => undefined) : undefined;
          return { ...answer, owner: install?.startedBy, since: (built ?? install)?.startTime, ip: status?.result?.ip };
        })().catch(() => ({ runs: [], temporalUi: undefined })),
      );
    }
    return runsOf.get(vmid);
  }

  async function act(vm, action) {
    if (action.confirm && !(await confirmAction(action.confirm(vm), `${action.label} VM ${vm.vmid}`))) return;
    notes.set(vm.vmid, `${action.label}: working…`);
    render(lastList);
    try {
      const answer = await post(`/vm/${vm.vmid}/${action.op}`);
      if (answer instanceof Response) {
        let last = '';
        await readEvents(answer, (e) => {
          last = e.message;
          notes.set(vm.vmid, `${action.label}: ${e.message}`);
          render(lastList);
        });
        notes.set(vm.vmid, `${action.label}: ${last.replace(/^\[[*+-]\] /, '') || 'done'}`);
      } else {
        notes.set(vm.vmid, `${action.label}: ${typeof answer === 'string' ? answer : answer.message ?? 'done'}`);
      }
      runsOf.delete(vm.vmid);
    } catch (err) {
      notes.set(vm.vmid, `${action.label} refused: ${err.message}`);
    }
    await refresh();
  }

  function runsPanel(vm, info) {
    if (!info.temporalUi) return h('td', { colspan: 9 }, 'no runs found');
    return h(
      'td',
      { colspan: 9 },
      h(
        'ul',
        { className: 'runs' },
        info.runs.map((r) =>
          h(
            'li',
            {},
            `${r.type} · ${r.status} · ${r.startTime ? new Date(r.startTime).toLocaleString() : ''}${r.startedBy ? ` · by ${r.startedBy}` : ''} · `,
            h('a', { href: temporalUiLink(info.temporalUi, r), target: '_blank', rel: 'noopener' }, 'Temporal UI'),
            r.type === 'installVm' && r.status !== 'RUNNING' ? [' · ', h('a', { href: `#timeline/${encodeURIComponent(r.workflowId)}` }, 'where the time went')] : null,
            r.type === 'installVm' && r.status === 'RUNNING' ? [' · ', h('a', { href: `#install/${encodeURIComponent(r.workflowId)}` }, 'watch')] : null,
          ),
        ),
      ),
    );
  }

  let lastList = [];
  const infos = new Map();

  function render(list) {
    lastList = list;
    body.replaceChildren(
      ...list.flatMap((vm) => {
        const info = infos.get(vm.vmid) ?? {};
        const actions = session.may('operate')
          ? ACTIONS.filter((a) => a.when(vm)).map((a) => h('button', { type: 'button', className: a.op === 'destroy' ? 'danger' : '', 'data-action': a.op, onclick: () => act(vm, a) }, a.label))
          : [];
        const toggle = h('button', { type: 'button', className: 'link', 'data-action': 'runs', onclick: () => { open.has(vm.vmid) ? open.delete(vm.vmid) : open.add(vm.vmid); render(lastList); } }, open.has(vm.vmid) ? 'hide runs' : 'runs');
        const row = h(
          'tr',
          { 'data-vmid': vm.vmid },
          h('td', {}, vm.vmid),
          h('td', {}, vm.name),
          h('td', { className: vm.running ? 'running' : 'stopped' }, vm.running ? 'running' : 'stopped'),
          h('td', {}, vm.node),
          h('td', {}, vm.ip ?? info.ip ?? ''),
          h('td', {}, vm.os),
          h('td', {}, info.owner ?? ''),
          h('td', {}, info.since ? age(info.since) : ''),
          h('td', { className: 'actions' }, ...actions, toggle),
        );
        const rows = [row];
        if (notes.has(vm.vmid)) rows.push(h('tr', { className: 'note' }, h('td', { colspan: 9 }, notes.get(vm.vmid))));
        if (open.has(vm.vmid)) rows.push(h('tr', { className: 'runs' }, runsPanel(vm, info)));
        return rows;
      }),
    );
  }

  async function refresh() {
    if (stopped) return;
    clearTimeout(timer);
    try {
      if (document.visibilityState === 'visible') {
        const answer = await getJson('/vm/list');
        status.textContent = `${answer.count} VMs · updated ${new Date().toLocaleTimeString()}`;
        render(answer.list);
        await Promise.all(answer.list.map(async (vm) => infos.set(vm.vmid, await runsFor(vm.vmid))));
        if (!stopped) render(answer.list);
      }
    } catch (err) {
      status.textContent = `could not read the VMs: ${err.message}`;
    }
    if (!stopped) timer = setTimeout(refresh, REFRESH_MS);
  }

  refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
