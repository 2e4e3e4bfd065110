import { toInstallSpec } from '../../api/installRequest';
import { InvalidRequestError } from '../../api/errors';
import type { Config } from '../../lib/config';
import type { AddressPool, InstallSpec, SizeCaps } from '../../contract';

/**
 * What the API makes of an install body, without a server: the spec it would start, or
 * the problem its 400 would name. Unit tests of the request rules share it.
 */
export function installAnswer(body: unknown, opts: { limits?: SizeCaps; nodes?: string[]; addressPools?: AddressPool[] } = {}): InstallSpec | string {
  const config = { limits: opts.limits ?? {}, defaultCiPassword: undefined, rootPassword: undefined, addressPools: opts.addressPools ?? [] } as unknown as Config;
  try {
    return toInstallSpec(body, config, opts.nodes ?? ['pve1', 'pve2']).spec;
  } catch (err) {
    if (err instanceof InvalidRequestError) return err.problem;
    throw err;
  }
}
