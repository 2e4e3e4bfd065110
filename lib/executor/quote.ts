/**
 * POSIX shell quoting for the SSH executor. sshd hands the command to the remote login
 * shell as one string, so every argv element is wrapped in single quotes: inside them a
 * POSIX shell interprets nothing at all ($, `, \, ;, newlines, globs are literal). A single
 * quote itself cannot appear inside, so it is closed, emitted as \' and reopened.
 */
export function shellQuote(arg: string): string {
  if (arg.includes('\0')) throw new Error('a command argument cannot contain a NUL byte');
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** One shell command line that runs argv[0] with every element as one literal argument. */
export function shellCommand(argv: readonly string[]): string {
  if (argv.length === 0) throw new Error('empty argv');
  return argv.map(shellQuote).join(' ');
}
