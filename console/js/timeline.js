import { getJson } from './api.js';
import { duration, h } from './dom.js';

/** How many of an OS version's latest installs the medians are taken over. */
const LAST = 10;

/**
 * Where the time went: a row per step of a finished install, a bar per stretch the step
 * ran, placed on the install's own clock (its events' workflow time, GET
 * /api/workflows/:id/steps).
 */
export function timelineView(main, _session, workflowId) {
  main.append(h('h2', {}, 'Where the time went ', h('code', {}, workflowId ?? '')));
  if (!workflowId) {
    main.append(h('p', {}, 'Open an install from a VM\'s runs.'));
    return;
  }
  getJson(`/workflows/${encodeURIComponent(workflowId)}/steps`)
    .then((answer) => {
      const steps = answer.steps;
      if (steps.length === 0) return main.append(h('p', {}, 'This run recorded no timed steps.'));
      const t0 = Math.min(...steps.map((s) => s.start));
      const total = Math.max(1, Math.max(...steps.map((s) => s.end)) - t0);
      main.append(
        h('p', {}, `${answer.type} · ${answer.status} · ${duration(total)} in all`),
        h(
          'ol',
          { className: 'timeline' },
          steps.map((s) => {
            // A bar per run: an SSH wait after a reboot is a second bar, not one across the init script.
            const bars = (s.runs ?? [{ start: s.start, end: s.end }]).map((run) => {
              const bar = h('span', { className: `bar ${s.status}` });
              // Positions through the CSSOM: the page's CSP allows no inline style attribute.
              bar.style.left = `${((run.start - t0) / total) * 100}%`;
              bar.style.width = `${Math.max(0.3, ((run.end - run.start) / total) * 100)}%`;
              return bar;
            });
            return h('li', { 'data-step': s.step }, h('span', { className: 'name' }, s.step), h('span', { className: 'track' }, bars), h('span', { className: 'time' }, duration(s.ms)));
          }),
        ),
      );
      if (answer.vmOs) return medians(main, answer);
    })
    .catch((err) => main.append(h('p', { className: 'error' }, `could not read the steps: ${err.message}`)));
}

/** This install's steps beside the medians of the last installs of its OS version, per source. */
async function medians(main, install) {
  const at = install.vmOs.lastIndexOf('-');
  const [os, version] = [install.vmOs.slice(0, at), install.vmOs.slice(at + 1)];
  const section = h('section', { 'data-section': 'medians' }, h('h3', {}, `Median per step, last ${LAST} installs of ${os} ${version}`));
  main.append(section);
  try {
    const m = await getJson(`/installs/step-medians?os=${encodeURIComponent(os)}&version=${encodeURIComponent(version)}&last=${LAST}`);
    const names = [...new Set([...install.steps.map((s) => s.step), ...m.image.steps.map((s) => s.step), ...m.template.steps.map((s) => s.step)])];
    const of = (steps, name) => steps.find((s) => s.step === name);
    const time = (s) => (s ? duration(s.medianMs ?? s.ms) : '');
    section.append(
      h(
        'table',
        {},
        h('thead', {}, h('tr', {}, h('th', {}, 'step'), h('th', {}, 'this install'), h('th', {}, `image installs (${m.image.installs})`), h('th', {}, `template installs (${m.template.installs})`))),
        h('tbody', {}, names.map((n) => h('tr', { 'data-step': n }, h('td', {}, n), h('td', {}, time(of(install.steps, n))), h('td', {}, time(of(m.image.steps, n))), h('td', {}, time(of(m.template.steps, n)))))),
      ),
    );
  } catch (err) {
    section.append(h('p', { className: 'error' }, err.message));
  }
}
