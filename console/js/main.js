import { getJson, token, ApiError } from './api.js';
import { h } from './dom.js';
import { vmsView } from './vms.js';
import { installView } from './install.js';
import { timelineView } from './timeline.js';
import { catalogView } from './catalog.js';

/**
 * The console's shell: who the caller is (GET /api/whoami decides what each view offers),
 * and which view the address names (`#vms`, `#install`, `#install/<workflowId>`,
 * `#timeline/<workflowId>`, `#templates`). Each view returns a function that stops its
 * timers and streams, so a hidden view costs nothing.
 */
const VIEWS = { vms: vmsView, install: installView, timeline: timelineView, templates: catalogView };
const ROLES = ['read', 'operate', 'admin'];

const session = {
  who: { name: null, role: 'read' },
  /** Whether the caller's role includes `role`: the API's own rule (each role includes those before it). */
  may: (role) => ROLES.indexOf(session.who.role) >= ROLES.indexOf(role),
};

let stopView = () => {};

async function learnWho() {
  const who = document.getElementById('who');
  try {
    session.who = await getJson('/whoami');
    who.textContent = session.who.name ? `${session.who.name} (${session.who.role})` : `no token (${session.who.role})`;
    who.className = '';
  } catch (err) {
    session.who = { name: null, role: 'read' };
    who.textContent = err instanceof ApiError && err.status === 401 ? (token.get() ? 'token refused' : 'this API needs a token') : `cannot reach the API: ${err.message}`;
    who.className = 'error';
  }
  document.body.dataset.role = session.who.role;
}

function route() {
  stopView();
  const [name, arg] = location.hash.replace(/^#/, '').split('/');
  const view = VIEWS[name] ? name : 'vms';
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.view === view);
  const main = document.getElementById('view');
  main.replaceChildren();
  main.dataset.view = view;
  stopView = VIEWS[view](main, session, arg ? decodeURIComponent(arg) : undefined) ?? (() => {});
}

document.getElementById('token').addEventListener('submit', async (e) => {
  e.preventDefault();
  const input = document.getElementById('token-input');
  token.set(input.value.trim());
  input.value = '';
  await learnWho();
  route();
});
document.getElementById('token-forget').addEventListener('click', async () => {
  token.set('');
  await learnWho();
  route();
});
window.addEventListener('hashchange', route);

await learnWho();
route();
document.body.append(h('footer', {}, 'QemuRun web console: the API at ', h('a', { href: '/api/openapi.json' }, '/api/openapi.json')));
