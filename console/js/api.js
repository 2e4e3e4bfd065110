/**
 * The API of the page's own origin. The token the user typed lives in this tab's
 * sessionStorage only (gone when the tab closes) and is sent as `Authorization: Bearer`;
 * the page never receives a secret from the API.
 */
const TOKEN_KEY = 'qemurun.token';

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) ?? '',
  set: (value) => (value ? sessionStorage.setItem(TOKEN_KEY, value) : sessionStorage.removeItem(TOKEN_KEY)),
};

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

function headers(extra = {}) {
  const t = token.get();
  return { ...(t ? { Authorization: `Bearer ${t}` } : {}), ...extra };
}

async function failure(res) {
  const text = await res.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return new ApiError(res.status, body?.message ?? (text || `${res.status} ${res.statusText}`), body);
}

/** GET a JSON answer. */
export async function getJson(path) {
  const res = await fetch(`/api${path}`, { headers: headers() });
  if (!res.ok) throw await failure(res);
  return res.json();
}

/** A change: always `Content-Type: application/json` (the API's cross-site rule), body or not. */
export async function post(path, body) {
  const res = await fetch(`/api${path}`, {
    method: 'POST',
    headers: headers({ 'Content-Type': 'application/json' }),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw await failure(res);
  const type = res.headers.get('Content-Type') ?? '';
  if (type.startsWith('text/event-stream')) return res;
  return type.includes('json') ? res.json() : res.text();
}

/**
 * Reads a `text/event-stream` answer through fetch (EventSource cannot send the
 * Authorization header): calls onEvent with each event's id and data until `event: close`.
 */
export async function readEvents(res, onEvent, signal) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  const abort = () => reader.cancel().catch(() => undefined);
  signal?.addEventListener('abort', abort, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += value;
      let end;
      while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
        let id;
        let event = 'message';
        const data = [];
        for (const line of frame.split(/\r?\n/)) {
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const v = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id') id = v;
          else if (field === 'event') event = v;
          else if (field === 'data') data.push(v);
        }
        if (event === 'close') return true;
        if (data.length > 0) onEvent({ id: id === undefined ? undefined : Number(id), ...JSON.parse(data.join('\n')) });
      }
    }
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}

/** Re-attaches to a workflow's events after `lastId` (the API's Last-Event-ID). */
export async function resumeEvents(workflowId, lastId, signal) {
  const res = await fetch(`/api/workflows/${encodeURIComponent(workflowId)}/events`, {
    headers: headers({ 'Last-Event-ID': String(lastId ?? 0) }),
    signal,
  });
  if (!res.ok) throw await failure(res);
  return res;
}
