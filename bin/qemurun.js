#!/usr/bin/env node
'use strict';
/**
 * `qemurun` (package.json "bin"; `npx qemurun ...` in this repository). Runs the compiled
 * CLI from dist/ when it is at least as new as its sources, else the sources themselves
 * through ts-node (a development checkout that has not been built since the last change).
 */
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const compiled = path.join(root, 'dist', 'cli', 'main.js');
// Written after each whole build; tsc leaves unchanged outputs (main.js) with their old times.
const stamp = path.join(root, 'dist', '.build-stamp');

function newest(dir) {
  let t = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    t = Math.max(t, entry.isDirectory() ? newest(p) : entry.name.endsWith('.ts') ? fs.statSync(p).mtimeMs : 0);
  }
  return t;
}

function builtIsCurrent() {
  try {
    const sources = path.join(root, 'cli');
    if (!fs.existsSync(compiled)) return false;
    return !fs.existsSync(sources) || fs.statSync(stamp).mtimeMs >= newest(sources);
  } catch {
    return false;
  }
}

if (builtIsCurrent()) {
  require(compiled);
} else {
  require('ts-node').register({ transpileOnly: true, swc: true, project: path.join(root, 'tsconfig.json') });
  require(path.join(root, 'cli', 'main.ts'));
}
