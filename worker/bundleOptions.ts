/**
 * How the workflow code is bundled, the same for `npm run build`, a worker that bundles at
 * start-up and the tests.
 *
 * The worker runs every workflow in one V8 context and gives each run its own copy of the
 * bundle's modules. zod (the input checks every workflow makes) is about 3 MB of objects a
 * copy; preloaded (../workflows/preload), one instance is shared by all runs.
 */
export const workflowBundlerOptions = {
  preloadModules: [require.resolve('../workflows/preload')],
};
