import net from 'node:net';

/**
 * One command over a QEMU JSON socket: QMP (the monitor: `system_powerdown`, `quit`,
 * `query-status`) or the guest agent's channel (`guest-ping`, `guest-network-get-
 * interfaces`). Each call opens the socket, speaks, and closes it: the socket takes one
 * client at a time, and a VM's sockets outlive any one caller.
 */
export async function qmpCommand(socket: string, execute: string, args?: object, timeoutMs = 10_000): Promise<unknown> {
  return jsonSession(socket, timeoutMs, async (send, next) => {
    const greeting = (await next()) as { QMP?: unknown };
    if (!greeting.QMP) throw new Error('not a QMP socket');
    await send({ execute: 'qmp_capabilities' });
    await expectReturn(next);
    await send({ execute, ...(args ? { arguments: args } : {}) });
    return expectReturn(next);
  });
}

/** A guest agent command; guest-sync first, so an answer left from an earlier caller is skipped. */
export async function guestAgentCommand(socket: string, execute: string, args?: object, timeoutMs = 10_000): Promise<unknown> {
  return jsonSession(socket, timeoutMs, async (send, next) => {
    const id = Math.floor(Math.random() * 2 ** 31);
    await send({ execute: 'guest-sync', arguments: { id } });
    for (;;) {
      const msg = (await next()) as { return?: unknown };
      if (msg.return === id) break;
    }
    await send({ execute, ...(args ? { arguments: args } : {}) });
    return expectReturn(next);
  });
}

async function expectReturn(next: () => Promise<unknown>): Promise<unknown> {
  for (;;) {
    const msg = (await next()) as { return?: unknown; error?: { class?: string; desc?: string }; event?: string };
    if (msg.event) continue;
    if (msg.error) throw new Error(msg.error.desc ?? msg.error.class ?? 'QMP error');
    return msg.return;
  }
}

async function jsonSession<T>(
  socket: string,
  timeoutMs: number,
  talk: (send: (msg: object) => Promise<void>, next: () => Promise<unknown>) => Promise<T>,
): Promise<T> {
  const conn = net.createConnection(socket);
  conn.setEncoding('utf8');
  const queue: unknown[] = [];
  const waiters: Array<{ resolve: (v: unknown) => void; reject: (e: Error) => void }> = [];
  let failed: Error | undefined;
  let buf = '';
  const fail = (err: Error) => {
    failed ??= err;
    for (const w of waiters.splice(0)) w.reject(failed);
  };
  conn.on('data', (chunk: string) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      let msg: unknown;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      const w = waiters.shift();
      if (w) w.resolve(msg);
      else queue.push(msg);
    }
  });
  conn.on('error', fail);
  conn.on('close', () => fail(new Error(`${socket}: connection closed`)));
  const timer = setTimeout(() => {
    fail(new Error(`${socket}: no answer within ${timeoutMs} ms`));
    conn.destroy();
  }, timeoutMs);
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      if (queue.length) return resolve(queue.shift());
      if (failed) return reject(failed);
      waiters.push({ resolve, reject });
    });
  const send = (msg: object) =>
    new Promise<void>((resolve, reject) => {
      if (failed) return reject(failed);
      conn.write(JSON.stringify(msg) + '\n', (err) => (err ? reject(err) : resolve()));
    });
  try {
    await new Promise<void>((resolve, reject) => {
      conn.once('connect', resolve);
      conn.once('error', reject);
    });
    return await talk(send, next);
  } finally {
    clearTimeout(timer);
    conn.destroy();
  }
}
