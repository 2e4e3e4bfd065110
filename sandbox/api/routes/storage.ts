import fs from 'node:fs';
import path from 'node:path';
import type { Route } from '../http';
import { ApiError, paramExc } from '../errors';
import { nodeStorages } from '../../cli/pvesh';
import { storageFor, storagePath } from '../../cli/storage';
import { listVolumes } from '../../state/volumes';
import { probeImage } from '../../cli/qm/image';
import { encodeText } from '../../state/escape';
import { nodePveVersion } from '../../state/model';

/** /nodes/{node}/storage/{storage}: status, content and download-url (pve-storage's API2::Storage). */

const auditable = (r: Parameters<Route['handle']>[0]) => r.check(`/storage/${r.params.storage}`, ['Datastore.Audit', 'Datastore.AllocateSpace'], true);

function storageOnNode(r: Parameters<Route['handle']>[0]) {
  const s = r.ctx().model.storages.find((x) => x.id === r.params.storage);
  if (!s) throw new ApiError(500, `storage '${r.params.storage}' does not exist\n`);
  if (s.nodes && !s.nodes.includes(r.params.node)) throw new ApiError(500, `storage '${s.id}' is not available on node '${r.params.node}'\n`);
  return s;
}

/** The file names download-url accepts for `import` (pve-storage's UPLOAD_IMPORT_EXT_RE_1). */
const IMPORT_NAME = /^[a-zA-Z0-9\-.+=_]+\.(ova|qcow2|raw|vmdk)$/;

export const storageRoutes: Route[] = [
  {
    method: 'GET',
    path: '/nodes/{node}/storage',
    props: {
      content: { type: 'string', optional: true },
      enabled: { type: 'boolean', optional: true },
      format: { type: 'boolean', optional: true },
      storage: { type: 'string', optional: true },
      target: { type: 'string', optional: true },
    },
    // Only the storages the token may audit or allocate on are listed.
    handle: (r) =>
      nodeStorages(r.ctx(), r.params.node).filter(
        (s) =>
          (r.can(`/storage/${s.storage}`, ['Datastore.Audit']) || r.can(`/storage/${s.storage}`, ['Datastore.AllocateSpace'])) &&
          (!r.params.storage || s.storage === r.params.storage) &&
          (r.params.enabled !== '1' || s.enabled === 1) &&
          (!r.params.content || r.params.content.split(/[,;\s]+/).every((c) => String(s.content).split(',').includes(c))),
      ),
  },
  {
    method: 'GET',
    path: '/nodes/{node}/storage/{storage}/status',
    handle: (r) => {
      auditable(r);
      // pve-storage PVE/API2/Storage/Status.pm, read_status: a storage storage_info does
      // not list for the node is a parameter error.
      const found = nodeStorages(r.ctx(), r.params.node).find((x) => x.storage === r.params.storage);
      if (!found) throw paramExc({ storage: 'No such storage.' });
      const { storage, ...rest } = found;
      void storage;
      return rest;
    },
  },
  {
    method: 'GET',
    path: '/nodes/{node}/storage/{storage}/content',
    props: { content: { type: 'string', optional: true }, vmid: { type: 'integer', optional: true } },
    handle: (r) => {
      auditable(r);
      const s = storageOnNode(r);
      const out: Array<Record<string, unknown>> = [];
      for (const v of listVolumes(r.dir, r.params.node, s.id)) {
        out.push({ content: 'images', ctime: 0, format: v.format, size: v.sizeBytes, used: v.dataBytes ?? v.sizeBytes, vmid: v.vmid, volid: v.volid });
      }
      for (const content of ['import', 'iso']) {
        const dir = r.ctx().paths.contentDir(r.params.node, s.id, content);
        for (const name of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
          if (name.includes('.tmp_dwnl.')) continue;
          const file = path.join(dir, name);
          const st = fs.statSync(file);
          const format = content === 'iso' ? 'iso' : probeImage(file).format;
          out.push({ content, ctime: Math.floor(st.mtimeMs / 1000), format, size: st.size, volid: `${s.id}:${content}/${name}` });
        }
      }
      return out
        .filter((v) => !r.params.content || v.content === r.params.content)
        .filter((v) => !r.params.vmid || v.vmid === Number(r.params.vmid))
        .sort((a, b) => (String(a.volid) < String(b.volid) ? -1 : 1));
    },
  },
  {
    method: 'POST',
    path: '/nodes/{node}/storage/{storage}/download-url',
    props: {
      url: { type: 'string', pattern: /^https?:\/\/.*/ },
      content: { type: 'string', enum: ['iso', 'vztmpl', 'import'] },
      filename: { type: 'string', maxLength: 255 },
      checksum: { type: 'string', optional: true },
      'checksum-algorithm': { type: 'string', optional: true, enum: ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'] },
      compression: { type: 'string', optional: true, enum: ['gz', 'lzo', 'zst', 'bz2'] },
      'verify-certificates': { type: 'boolean', optional: true },
    },
    handle: (r) => {
      const p = r.params;
      // Before 8.4 the content enumeration had no `import`; the node of the path decides
      // (download_url is proxied to it, `proxyto => 'node'`).
      const [major, minor] = nodePveVersion(r.ctx().model, p.node).release.split('.').map(Number);
      if (p.content === 'import' && major * 100 + minor < 804) throw paramExc({ content: "value 'import' does not have a value in the enumeration 'iso, vztmpl'" });
      r.check(`/storage/${p.storage}`, ['Datastore.AllocateTemplate']);
      // Probing the node's network: Sys.Audit and Sys.Modify on /, or Sys.AccessNetwork on the node.
      if (!r.can('/', ['Sys.Audit', 'Sys.Modify']) && !r.can(`/nodes/${p.node}`, ['Sys.AccessNetwork'])) throw new ApiError(403, 'Permission check failed\n');
      if ((p.checksum === undefined) !== (p['checksum-algorithm'] === undefined)) {
        const missing = p.checksum === undefined ? 'checksum' : 'checksum-algorithm';
        throw paramExc({ [missing]: `parameter is missing and it is required by '${missing === 'checksum' ? 'checksum-algorithm' : 'checksum'}'` });
      }
      const ctx = r.ctx();
      let s;
      try {
        s = storageFor(ctx, p.storage);
      } catch (e) {
        throw new ApiError(500, `${(e as Error).message}\n`);
      }
      if (!storagePath(s)) throw new ApiError(500, `can't upload to storage type '${s.type}', not a file based storage!\n`);
      if (!s.content.includes(p.content)) throw new ApiError(500, `storage '${s.id}' is not configured for content-type '${p.content}'\n`);
      const filename = p.filename.replace(/\n$/, '').replace(/^.*[/\\]/, '').replace(/[^a-zA-Z0-9_.-]/g, '_');
      if (p.content !== 'import') throw new ApiError(501, `sandbox: download-url keeps only content 'import'\n`);
      if (!IMPORT_NAME.test(filename)) throw paramExc({ filename: 'invalid filename or wrong extension' });
      if (!s.active) throw new ApiError(500, `storage '${s.id}' is not online\n`);
      const params = { storage: s.id, content: p.content, filename, url: p.url, ...(p.checksum ? { checksum: p.checksum, 'checksum-algorithm': p['checksum-algorithm'] } : {}) };
      return r.tasks.fork({ node: p.node, type: 'download', id: encodeText(filename), user: r.user }, { op: 'download', params, faultArgv: ['pvesh', 'create', `/nodes/${p.node}/storage/${s.id}/download-url`] });
    },
  },
];
