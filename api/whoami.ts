import { Router, type Request, type Response } from 'express';
import type { Config } from '../lib/config';
import { effectiveRole } from './guard';

/**
 * `GET /api/whoami`: the caller's token name and the role the guards will grant it, so a
 * client (the web console) offers only what would not be refused. Never the token itself.
 */
export function whoamiRoutes(config: Config): Router {
  const router = Router();
  const roleOf = effectiveRole(config);
  router.get('/whoami', (req: Request, res: Response) => {
    res.json({ success: true, ...roleOf(req, res), tokens: config.apiTokens.length > 0 });
  });
  return router;
}
