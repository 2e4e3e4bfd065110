import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { REPO_ROOT } from '../../lib/repoRoot';
import { defineRoutes } from '../route';

export interface OpenApiRouteDeps {
  /**
   * api/openapi/document.ts's builder, handed in by createApp: the document is built from
   * the route table, which lists this route too.
   */
  openApiDocument: (version: string) => Record<string, unknown>;
}

/** GET /api/openapi.json: built once, on the first request. */
export const openApiRoutes = defineRoutes({
  stage: 'open',
  at: '/api',
  setup: ({ openApiDocument }: OpenApiRouteDeps) => {
    let doc: Record<string, unknown> | undefined;
    return {
      document: () =>
        (doc ??= openApiDocument((JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version)),
    };
  },
  routes: [
    {
      method: 'GET',
      path: '/openapi.json',
      summary: 'This document',
      answers: { 200: { description: 'OpenAPI 3.1', json: z.record(z.string(), z.unknown()) } },
      handle: ({ document }, _req, res) => {
        res.json(document());
      },
    },
  ],
});
