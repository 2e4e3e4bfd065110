// The project compiles to CommonJS; execa 9 and its dependencies are ESM-only.
// Node >= 20.19 loads them at run time through require(esm), but jest's own module
// loader does not, so these packages (and only these) are transpiled to CommonJS here.
const esmOnly = [
  'execa', '@sindresorhus/merge-streams', '@sec-ant/readable-stream', 'figures', 'get-stream',
  'human-signals', 'is-plain-obj', 'is-stream', 'is-unicode-supported', 'npm-run-path',
  'parse-ms', 'path-key', 'pretty-ms', 'strip-final-newline', 'unicorn-magic', 'yoctocolors',
];

module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.[tj]s$': ['ts-jest', {
      tsconfig: { allowJs: true, isolatedModules: true, module: 'commonjs', target: 'es2022', esModuleInterop: true },
    }],
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esmOnly.join('|')})/)`],
  // unicorn-magic exports only an "import" condition, which jest's CommonJS resolver skips.
  moduleNameMapper: { '^unicorn-magic$': '<rootDir>/node_modules/unicorn-magic/node.js' },
  globalSetup: '<rootDir>/test/support/globalSetup.ts',
  globalTeardown: '<rootDir>/test/support/globalTeardown.ts',
  testTimeout: 120_000,
};
