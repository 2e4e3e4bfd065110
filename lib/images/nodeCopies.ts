import type { NodeExecutor } from '../executor/types';

/**
 * Copies of cloud images on a main node reached over SSH, where `qm importdisk` reads
 * them: `<root>/<first 16 hex digits of the checksum>/<image file name>`. A new upstream
 * release lands in a directory of its own, so a copy is never changed under a running
 * import; the copies it replaces are pruned here, or the node's disk would fill with one
 * image per release.
 */

/** Older copies of an image stay this long after their last use, for imports still reading them. */
const KEEP_UNUSED_COPY_MINUTES = 60;

export function copyDir(root: string, sha: string): string {
  return `${root}/${sha.slice(0, 16)}`;
}

/** find(1) -path patterns treat [ ] * ? and \ specially; the root is matched literally. */
function globLiteral(s: string): string {
  return s.replace(/[[\]*?\\]/g, '\\$&');
}

/** Marks a copy as used now, so pruning on behalf of a newer release leaves it alone for a while. */
export async function touchCopy(node: NodeExecutor, file: string): Promise<void> {
  await node.run(['touch', '-c', '--', file]);
}

/**
 * Removes the other releases' copies of `fileName` (and part files of interrupted copies)
 * unused for KEEP_UNUSED_COPY_MINUTES, then their emptied directories. Only paths of this
 * layout are touched, whatever else shares the root. Returns the removed files.
 */
export async function pruneOlderCopies(node: NodeExecutor, root: string, sha: string, fileName: string): Promise<string[]> {
  const hex16 = '[0-9a-f]'.repeat(16);
  const base = `${globLiteral(root)}/${hex16}/${globLiteral(fileName)}`;
  const found = await node.run([
    'find', root, '-mindepth', '2', '-maxdepth', '2', '-type', 'f',
    '(', '-path', base, '-o', '-path', `${base}.*.part`, ')',
    '!', '-path', `${globLiteral(copyDir(root, sha))}/*`,
    '-mmin', `+${KEEP_UNUSED_COPY_MINUTES}`,
    '-print', '-delete',
  ]);
  await node.run(['find', root, '-mindepth', '1', '-maxdepth', '1', '-type', 'd', '-path', `${globLiteral(root)}/${hex16}`, '-empty', '-delete']);
  return found.stdout.split('\n').filter(Boolean);
}
