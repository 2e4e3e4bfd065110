/**
 * The suites jest.config.js lists in `apiModeSuites` run twice: in CLI mode (qm, pvesh,
 * pvesm) and in API mode (the sandbox's REST API). A plain `test` in them crosses the
 * Proxmox boundary and runs both ways; what QemuRun does the same way in both modes (its
 * HTTP layer, input checks, Temporal, the workflow's own branches) runs once, in CLI mode.
 */
export const apiMode = process.env.TEST_PROXMOX_MODE === 'api';

/** A test that proves nothing about how Proxmox is reached: it runs in CLI mode only. */
export const onceInCliMode = apiMode ? test.skip : test;

/** A test of what only API mode does. */
export const apiModeOnly = apiMode ? test : test.skip;
