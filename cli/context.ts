import { ApiClient } from './client';

/** What every command gets: the API client and how to print. */
export interface Context {
  client: ApiClient;
  json: boolean;
  /** stdout is a terminal: draw progress in place; otherwise plain lines. */
  tty: boolean;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

export const DEFAULT_URL = 'http://127.0.0.1:8080';

export function createContext(opts: { url?: string; json?: boolean }, env: NodeJS.ProcessEnv = process.env): Context {
  return {
    client: new ApiClient({ url: opts.url ?? env.QEMURUN_URL ?? DEFAULT_URL, token: env.API_TOKEN || undefined }),
    json: opts.json ?? false,
    tty: Boolean(process.stdout.isTTY) && env.TERM !== 'dumb',
    stdout: process.stdout,
    stderr: process.stderr,
  };
}

/** A command's work: returns the exit status. */
export type Action = (ctx: Context, ...args: any[]) => Promise<number>;
/** Wraps an action as a commander handler: builds the context from the global flags, sets the exit status. */
export type Runner = (fn: Action) => (...args: any[]) => Promise<void>;
