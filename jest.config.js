// The project compiles to CommonJS; execa 9 and its dependencies are ESM-only.
// Node >= 20.19 loads them at run time through require(esm), but jest's own module
// loader does not, so these packages (and only these) are transpiled to CommonJS here.
const esmOnly = [
  'execa', '@sindresorhus/merge-streams', '@sec-ant/readable-stream', 'figures', 'get-stream',
  'human-signals', 'is-plain-obj', 'is-stream', 'is-unicode-supported', 'npm-run-path',
  'parse-ms', 'path-key', 'pretty-ms', 'strip-final-newline', 'unicorn-magic', 'yoctocolors',
  // log-update (the CLI's terminal view) and its dependencies.
  'log-update', 'ansi-escapes', 'ansi-regex', 'ansi-styles', 'cli-cursor', 'emoji-regex', 'environment',
  'get-east-asian-width', 'is-fullwidth-code-point', 'mimic-function', 'onetime', 'restore-cursor',
  'slice-ansi', 'string-width', 'strip-ansi', 'wrap-ansi',
];

const common = {
  testEnvironment: 'node',
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.[tj]s$': ['ts-jest', {
      tsconfig: { allowJs: true, isolatedModules: true, module: 'commonjs', target: 'es2022', esModuleInterop: true },
    }],
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esmOnly.join('|')})/)`],
  moduleNameMapper: {
    // unicorn-magic exports only an "import" condition, which jest's CommonJS resolver skips.
    '^unicorn-magic$': '<rootDir>/node_modules/unicorn-magic/node.js',
    // The sandbox package from its sources, as tsconfig.json's `paths` has it: no build first.
    '^@qemurun/sandbox$': '<rootDir>/sandbox/index.ts',
  },
};

// The end-to-end files that cross the Proxmox boundary (they make Proxmox calls whose shape
// differs between qm/pvesh/pvesm and the REST API: create, import, set, migrate, start,
// clone, templates, the guest agent, failures Proxmox reports), which run a second time with
// the sandbox reached through its REST API (Proxmox API mode). What the HTTP layer does
// (input errors, idempotency keys, Last-Event-ID, concurrency of the API) is the same in
// both modes and is proven once, in the e2e project.
const apiModeSuites = ['install.e2e', 'install.behaviour', 'install.placement', 'install.userData', 'install.dhcp', 'lifecycle', 'lifecycle.cpu', 'rebuild', 'templates', 'templates.current'];

const endToEnd = {
  ...common,
  globalSetup: '<rootDir>/test/support/globalSetup.ts',
  globalTeardown: '<rootDir>/test/support/globalTeardown.ts',
  // Each file's own Temporal namespace (test/support/namespaces.ts).
  setupFilesAfterEnv: ['<rootDir>/test/support/namespaceSetup.ts'],
};

// Six projects: five with a folder each, sorted by what a test starts (docs/development.md),
// and a second pass of some end-to-end suites. `npm test` (scripts/test.js) runs them, the slow ones
// side by side:
// - unit (test/unit/, and the sandbox package's sandbox/test/unit/): no Temporal server, no
//   sandbox cluster, no sshd; no global set-up, so selecting it pays for no dev server, and
//   its files run in parallel workers;
// - workflow (test/workflows/): the workflow code on Temporal's time-skipping test server
//   with fake activities, in seconds;
// - proxmox (test/proxmox/ and sandbox/test/cluster/): the sandbox cluster, its CLIs and
//   REST API (the sandbox's own tests), and the product's Proxmox clients and executors
//   against it, with real sshd; no Temporal, and files that share nothing, so they run in
//   parallel workers;
// - e2e (test/e2e/): a real Temporal dev server (started once by the global set-up, which
//   runs only when one of its files is selected), the Proxmox sandbox, real OpenSSH and
//   real HTTP; its files share that server and the cores, so they run one at a time, each
//   in a namespace of its own and in a shuffled order (test/support/sequencer.js);
// - guests (test/guests/): real QEMU machines booting real Debian images;
// - api-mode: the e2e suites above once more, the service reaching the sandbox through
//   its REST API instead of qm/pvesh/pvesm.
module.exports = {
  testTimeout: 120_000,
  testSequencer: '<rootDir>/test/support/sequencer.js',
  projects: [
    {
      ...common,
      displayName: 'unit',
      roots: ['<rootDir>/test/unit', '<rootDir>/sandbox/test/unit'],
    },
    {
      ...common,
      displayName: 'workflow',
      roots: ['<rootDir>/test/workflows'],
      globalSetup: '<rootDir>/test/workflows/support/globalSetup.ts',
      globalTeardown: '<rootDir>/test/workflows/support/globalTeardown.ts',
    },
    {
      ...common,
      displayName: 'proxmox',
      roots: ['<rootDir>/test/proxmox', '<rootDir>/sandbox/test/cluster'],
    },
    {
      ...endToEnd,
      displayName: 'e2e',
      roots: ['<rootDir>/test/e2e'],
    },
    {
      ...endToEnd,
      // Real guests (SANDBOX_GUESTS=qemu): QEMU machines booting real Debian images.
      displayName: 'guests',
      roots: ['<rootDir>/test/guests'],
    },
    {
      ...endToEnd,
      displayName: 'api-mode',
      roots: ['<rootDir>/test/e2e'],
      testMatch: apiModeSuites.map((name) => `<rootDir>/test/e2e/${name}.test.ts`),
      setupFiles: ['<rootDir>/test/support/apiModeSetup.ts'],
    },
  ],
};
