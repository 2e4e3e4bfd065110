/**
 * The api-mode jest project runs suites written for CLI mode a second time with the
 * sandbox reached through its REST API. Its runs use a Temporal namespace of their own
 * (globalSetup creates it): workflow ids such as `vm-131` are namespace-wide, and a file's
 * two runs may go side by side in two jest workers.
 */
export const API_MODE_NAMESPACE = 'qemurun-api-mode';
