import fs from 'node:fs';
import path from 'node:path';

/**
 * The API examples of README.md and docs/*.md, as written: every ```bash block with a curl, and
 * every inline `curl ...` in the prose, that calls the API. A block's commands are split where a line starts
 * with `curl` or a `NAME=value` assignment; the assignments are kept for the commands
 * after them, as a reader pasting the block line by line would have them.
 */

export interface DocCommand {
  /** The command as in the document (continuation lines and trailing comment included). */
  text: string;
  /** Assignments written before it in the same block (`API=...`). */
  setup: string[];
  /** Its trailing `# comment`, which often states the answer. */
  comment: string | undefined;
}

export interface DocBlock {
  file: string;
  commands: DocCommand[];
}

/** The API examples (blocks with a `curl`) of one document. */
export function docBlocks(file: string): DocBlock[] {
  const text = fs.readFileSync(file, 'utf8');
  const blocks: DocBlock[] = [];
  for (const m of text.matchAll(/^```bash\n([\s\S]*?)^```$/gm)) {
    // Blocks of other commands (`npm start`) are the newcomer's steps, not API examples.
    if (!/^curl /m.test(m[1])) continue;
    blocks.push({ file: path.basename(file), commands: splitCommands(m[1]) });
  }
  // Inline examples: `curl ...` in a sentence.
  const prose = text.replace(/^```[\s\S]*?^```$/gm, '');
  for (const m of prose.matchAll(/`(curl [^`]+)`/g)) {
    blocks.push({ file: path.basename(file), commands: [{ text: m[1], setup: [], comment: undefined }] });
  }
  return blocks;
}

function splitCommands(body: string): DocCommand[] {
  const commands: DocCommand[] = [];
  const setup: string[] = [];
  for (const line of body.split('\n')) {
    if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
    if (/^[A-Z_][A-Z0-9_]*=\S+$/.test(line)) {
      setup.push(line);
    } else if (line.startsWith('curl ')) {
      commands.push({ text: line, setup: [...setup], comment: undefined });
    } else if (commands.length > 0) {
      commands[commands.length - 1].text += `\n${line}`;
    } else {
      throw new Error(`example line outside a command: ${line}`);
    }
  }
  for (const c of commands) c.comment = /\s#\s+(.*)$/m.exec(c.text)?.[1]?.trim();
  return commands;
}

/** The answer of one command run with `curl -sS -w '\n%{http_code}'` added. */
export interface CurlAnswer {
  status: number;
  body: string;
  /** The JSON `data:` events, when the answer is an event stream. */
  events: Array<{ step: string; status: string; message: string }>;
}

/** Adds the status-code trailer to every curl of a command; the rest stays as written. */
export function withStatus(command: string): string {
  return command.replace(/^curl /gm, `curl -sS -w '\\n%{http_code}\\n' `);
}

export function parseCurlAnswer(stdout: string): CurlAnswer {
  const lines = stdout.replace(/\n$/, '').split('\n');
  const status = Number(lines.pop());
  const body = lines.join('\n');
  const events = lines.filter((l) => l.startsWith('data: {"step"')).map((l) => JSON.parse(l.slice(6)));
  return { status, body, events };
}
