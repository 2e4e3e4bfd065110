#!/usr/bin/env node
import { runCli } from './program';

void runCli(process.argv.slice(2)).then((code) => {
  // Exit once stdout has drained: a piped `--json` reader must get every line.
  process.stdout.write('', () => process.exit(code));
});
