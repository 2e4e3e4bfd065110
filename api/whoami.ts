import type { Config } from '../lib/config';
import { effectiveRole } from './guard';
import * as answers from './openapi/responses';
import { defineRoutes } from './route';

/**
 * `GET /api/whoami`: the caller's token name and the role the guards will grant it, so a
 * client (the web console) offers only what would not be refused. Never the token itself.
 */
export const whoamiRoutes = defineRoutes({
  stage: 'api',
  at: '/api',
  setup: ({ config }: { config: Config }) => ({ config, roleOf: effectiveRole(config) }),
  routes: [
    {
      method: 'GET',
      path: '/whoami',
      summary: "The caller's token name and the role the guards grant it (what a client should offer)",
      answers: { 200: { description: 'who the caller is', json: answers.whoami } },
      handle: ({ config, roleOf }, req, res) => {
        res.json({ success: true, ...roleOf(req, res), tokens: config.apiTokens.length > 0 });
      },
    },
  ],
});
