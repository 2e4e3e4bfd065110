import { ensureSshKey, type SshKeyPair } from '../lib/sshKey';
import type { Config } from '../lib/config';
import { StartupError, reason } from '../lib/startupError';

/** The service's own SSH key (to the nodes and the guests), made on first start. */
export function serviceSshKey(config: Config): SshKeyPair {
  try {
    return ensureSshKey(config.sshKeyPath);
  } catch (err) {
    throw new StartupError(
      `SSH_KEY_PATH=${config.sshKeyPath}: cannot read or create the SSH key (${reason(err).split('\n')[0]}); ` +
        'point SSH_KEY_PATH at a readable private key with its .pub beside it',
      undefined,
      { cause: err },
    );
  }
}
