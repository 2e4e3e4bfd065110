import fs from 'node:fs';
import path from 'node:path';
import type { RequestHandler } from 'express';
import { REPO_ROOT } from '../../lib/repoRoot';
import { openApiDocument } from './document';

/** GET /api/openapi.json: built once, on the first request. */
export function openApiRoute(): RequestHandler {
  let doc: Record<string, unknown> | undefined;
  return (_req, res) => {
    doc ??= openApiDocument((JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version);
    res.json(doc);
  };
}
