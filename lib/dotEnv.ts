/**
 * Settings from a `.env` file in the working directory, when there is one (docs/deployment.md):
 * imported for this effect first thing by the entry points, before any module reads
 * process.env. Node's own parser (every supported Node has it); variables already set in
 * the environment win, as they did with dotenv.
 */
try {
  process.loadEnvFile('.env');
} catch (err) {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
}
