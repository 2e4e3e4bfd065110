import { getJson } from './api.js';
import { duration, h } from './dom.js';

/**
 * Where the time went: one bar per step of a finished install, placed on the install's
 * own clock (its events' workflow time, GET /api/workflows/:id/steps).
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
            const bar = h('span', { className: `bar ${s.status}` });
            // Positions through the CSSOM: the page's CSP allows no inline style attribute.
            bar.style.marginLeft = `${((s.start - t0) / total) * 100}%`;
            bar.style.width = `${Math.max(0.3, (s.ms / total) * 100)}%`;
            return h('li', { 'data-step': s.step }, h('span', { className: 'name' }, s.step), h('span', { className: 'track' }, bar), h('span', { className: 'time' }, duration(s.ms)));
          }),
        ),
      );
    })
    .catch((err) => main.append(h('p', { className: 'error' }, `could not read the steps: ${err.message}`)));
}
