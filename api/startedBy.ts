import type { Response } from 'express';
import { STARTED_BY_MEMO } from '../contract';
import { actorOf } from './guard';

/**
 * The memo key naming the token that started a workflow, so that the operate role can
 * cancel its own work and only its own. The memo goes through the payload codec like
 * every payload; a token's name is no secret anyway.
 */
export const STARTED_BY = STARTED_BY_MEMO;

/** `{ startedBy: <token name> }`, or nothing when no tokens are configured. */
export function startedByMemo(res: Response): Record<string, string> {
  const actor = actorOf(res);
  return actor === undefined ? {} : { [STARTED_BY]: actor };
}
