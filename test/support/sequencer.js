'use strict';
/**
 * The order test files run in. End-to-end files (e2e, api-mode, proxmox, guests) run in a
 * shuffled order, printed with its seed, so a file that leans on what an earlier one left
 * behind fails here rather than on a machine where the order happens to differ;
 * `TEST_ORDER_SEED=<seed>` runs that order again. The unit and workflow projects keep
 * jest's own order (slowest known first), which packs their parallel workers best.
 */
const path = require('node:path');
const crypto = require('node:crypto');
const Sequencer = require('@jest/test-sequencer').default;

const SHUFFLED = new Set(['e2e', 'api-mode', 'proxmox', 'guests']);

/** A small seeded generator (mulberry32): the same seed gives the same order on any machine. */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function projectOf(test) {
  const name = test.context.config.displayName;
  return typeof name === 'string' ? name : name?.name;
}

class ShufflingSequencer extends Sequencer {
  sort(tests) {
    if (tests.length === 0 || !tests.every((t) => SHUFFLED.has(projectOf(t)))) return super.sort(tests);
    const seed = process.env.TEST_ORDER_SEED ? Number(process.env.TEST_ORDER_SEED) : crypto.randomInt(2 ** 31);
    const next = random(seed);
    const order = [...tests].sort((a, b) => a.path.localeCompare(b.path) || projectOf(a).localeCompare(projectOf(b)));
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    const names = order.map((t) => `${projectOf(t)}:${path.basename(t.path)}`);
    process.stderr.write(`test file order (TEST_ORDER_SEED=${seed}): ${names.join(' ')}\n`);
    return order;
  }
}

module.exports = ShufflingSequencer;
