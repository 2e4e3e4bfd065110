import type { ApiNode, TaskOptions } from '../proxmox';
import type { ImageSource } from './catalog';
import { ImageError } from './errors';
import { fetchExpectedChecksum } from './remote';

/** `download-url` takes `content=import` (cloud images as disk sources) since PVE 8.4. */
const MIN_NODE_DOWNLOAD_VERSION = [8, 4] as const;

/**
 * The node runs a Proxmox VE older than 8.4, which cannot fetch a cloud image as a disk
 * source. Uploading the image through the API instead would route every image through the
 * service again, the very thing API mode avoids; such a cluster keeps the CLI mode.
 */
export class NodeTooOldError extends ImageError {
  override readonly name = 'NodeTooOldError';
}

/**
 * The name an image gets on the node's storage: the upstream name with the first 12 hex
 * digits of its published checksum, so each release is downloaded once per storage and a
 * new release under a moving name (`latest`) is a new file. Always `.qcow2`: every
 * official image is qcow2 (Ubuntu's `.img` too), and `import` content knows it by that.
 */
export function nodeImageName(source: ImageSource, hex: string): string {
  const stem = source.fileName.replace(/\.(?:qcow2|img)$/, '');
  return `${stem}-${hex.slice(0, 12)}.qcow2`;
}

export function versionAtLeast(version: string, min: readonly number[]): boolean {
  const parts = version.split(/[.-]/).map((p) => Number.parseInt(p, 10));
  for (let i = 0; i < min.length; i++) {
    const v = Number.isFinite(parts[i]) ? parts[i] : 0;
    if (v !== min[i]) return v > min[i];
  }
  return true;
}

export interface NodeImage {
  /** `<storage>:import/<file>`, what `import-from` takes. */
  volid: string;
  /** The published checksum the node verified. */
  sha: string;
  algorithm: string;
  downloaded: boolean;
}

/**
 * The official image on `storage` of `node`, fetched by the node itself: the service reads
 * only the checksum file. Present already (same release) is reused; otherwise
 * `download-url` with the checksum makes the node verify what it fetched. A task recorded
 * by an earlier attempt (`resumeTask`) is followed rather than started again.
 */
export async function ensureImageOnNode(
  node: ApiNode,
  storage: string,
  source: ImageSource,
  opts: TaskOptions & { onLine?: (line: string) => void } = {},
): Promise<NodeImage> {
  const { version } = await node.version(opts);
  if (!versionAtLeast(version, MIN_NODE_DOWNLOAD_VERSION)) {
    throw new NodeTooOldError(
      `node '${node.node}' runs Proxmox VE ${version}; images fetched by the node (download-url with content=import) need ${MIN_NODE_DOWNLOAD_VERSION.join('.')} or later: upgrade, or use the CLI mode (unset PROXMOX_API_URL)`,
    );
  }
  const expected = await fetchExpectedChecksum(source, opts.signal);
  const filename = nodeImageName(source, expected.hex);
  const volid = `${storage}:import/${filename}`;
  const result = (downloaded: boolean): NodeImage => ({ volid, sha: expected.hex, algorithm: expected.algorithm, downloaded });
  if (!opts.resumeTask) {
    const present = await node.storageContent(storage, 'import', opts);
    if (present.some((v) => v.volid === volid)) return result(false);
  }
  await node.downloadUrl(storage, { url: source.url, filename, content: 'import', checksum: expected.hex, algorithm: expected.algorithm }, opts);
  return result(true);
}
