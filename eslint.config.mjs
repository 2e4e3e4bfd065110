// @ts-check
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

/**
 * Lint rules that guard the architecture, not the formatting: promises that nobody awaits,
 * what workflow code may import (it runs in Temporal's deterministic sandbox, bundled
 * without Node), and which way imports point between layers.
 */

const nodeBuiltins = builtinModules.filter((m) => !m.startsWith('_'));

const nodeBuiltinPaths = nodeBuiltins.map((name) => ({
  name,
  message: 'Node built-ins do not exist in the workflow sandbox: do this in an activity.',
}));
const nodeBuiltinPattern = {
  group: ['node:*'],
  message: 'Node built-ins do not exist in the workflow sandbox: do this in an activity.',
};
/** The npm packages `packages` allows, as a pattern refusing every other one. */
const onlyPackages = (packages, why) => ({
  regex: `^(?!\\.|(${packages.map((p) => p.replace('/', '\\/')).join('|')})$)`,
  message: `${why}: ${packages.join(', ')} only.`,
});
/** The contract runs in the workflow sandbox and uses the SDK's common types and zod. */
const nodeSidePackages = onlyPackages(['@temporalio/workflow', '@temporalio/common', 'zod'], 'Node-side package: code bundled into the workflow sandbox uses');
/** Workflow code takes everything else (failure classes, schemas) through the contract. */
const workflowPackages = onlyPackages(['@temporalio/workflow'], 'Workflow code imports the SDK as @temporalio/workflow and the rest through ../contract');

/** The product's folders: none reaches into sandbox/, a package of its own. */
const productFolders = ['api', 'activities', 'lib', 'worker', 'app'];
/** From a product file at any depth: the sandbox's folder, by a relative path. */
const sandboxInternals = {
  regex: '^(\\./|(\\.\\./)+)sandbox(/|$)',
  message: 'The sandbox is a package of its own (@qemurun/sandbox): the product loads it in app/sandbox.ts only; tests use sandbox/testkit.ts.',
};

/**
 * The production image leaves the sandbox package out (Dockerfile): the product names its
 * types, and loads it with import() where sandbox mode runs (app/sandbox.ts), never with a
 * value import, which would make every start need it.
 */
const sandboxPackage = {
  regex: '^@qemurun/sandbox(/|$)',
  allowTypeImports: true,
  message: 'The sandbox is not in the production image: import its types only, and load it with import() in app/sandbox.ts.',
};
/** import() of the sandbox package: only the loader, app/sandbox.ts, does it. */
const sandboxImportExpression = {
  selector: "ImportExpression[source.value=/^@qemurun\\/sandbox/]",
  message: 'Only app/sandbox.ts loads the sandbox package: call its functions.',
};

/**
 * sandbox/ has folders named like the product's (sandbox/api, sandbox/cli): a pattern on
 * the import string tells a path out of sandbox/ only by the file's depth, so one block per depth.
 */
const sandboxDepths = [0, 1, 2, 3];

/** Pure lib/ modules workflow code may import besides contract/ (none yet: add one here with a reason). */
const workflowLib = [];

/** Module-level state outside a composition root (see the block that applies it). */
const mutableCollection = 'NewExpression[callee.name=/^(Map|Set|WeakMap|WeakSet|Array)$/]';
const notReadonly = ':not([id.typeAnnotation.typeAnnotation.typeName.name=/^Readonly/])';
const moduleStateBans = [
  { selector: "Identifier[name='globalThis']", message: 'No state on the global object: make it at a composition root (app/, main.ts) and pass it in.' },
  ...['Program', 'Program > ExportNamedDeclaration'].flatMap((top) => [
    {
      selector: `${top} > VariableDeclaration[kind!='const']`,
      message: 'No module-level `let`/`var`: state belongs to an object made at a composition root (app/, main.ts) and passed in.',
    },
    {
      selector: `${top} > VariableDeclaration > VariableDeclarator${notReadonly} > ${mutableCollection}.init`,
      message: 'No module-level mutable collection: make it at a composition root and pass it in, or type a constant table ReadonlySet/ReadonlyMap.',
    },
  ]),
];

export default tseslint.config(
  { ignores: ['node_modules/', '**/dist/', '.tools/', 'data/', 'test-artifacts/', '**/*.js', '**/*.mjs'] },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A promise nobody awaits loses its error (an unhandled rejection kills the process)
      // and its ordering. Fire-and-forget is written `void promise` with a comment saying why.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    // Workflow code is bundled into Temporal's sandbox: no Node built-ins, no Node-side
    // packages, and from the project only the contract (and the pure lib/ modules listed
    // above). Even type imports go through contract/, so a workflow never depends on how
    // an activity or the API is written.
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: nodeBuiltinPaths,
        patterns: [
          nodeBuiltinPattern,
          workflowPackages,
          {
            regex: `^\\.\\./(?!(contract${workflowLib.map((m) => `|lib/${m}`).join('')})$)`,
            message: 'Workflow code imports only ../contract (and the pure lib/ modules eslint.config.mjs lists) besides other workflow files.',
          },
        ],
      }],
    },
  },
  {
    // The bundle's preload module (worker/bundleOptions.ts) evaluates zod once before any
    // run, for the contract's schemas: the one workflow file that names zod itself.
    files: ['workflows/preload.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: nodeBuiltinPaths,
        patterns: [nodeBuiltinPattern, onlyPackages(['@temporalio/workflow', 'zod'], 'The workflow preload module uses')],
      }],
    },
  },
  {
    // The contract is bundled into the workflow sandbox with the workflows, and is what
    // every layer depends on: it imports nothing of the project's but itself.
    files: ['contract/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: nodeBuiltinPaths,
        patterns: [
          nodeBuiltinPattern,
          nodeSidePackages,
          { regex: '^\\.\\./', message: 'contract/ imports only its own files: every other layer depends on it, not the other way.' },
        ],
      }],
      // Method syntax in an interface is checked bivariantly: an activity implementation
      // requiring a field the contract's input lacks would compile. Property syntax is not.
      '@typescript-eslint/method-signature-style': ['error', 'property'],
    },
  },
  {
    // lib/ is the library layer: the service's parts use it, it uses none of them.
    files: ['lib/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [{
          regex: '^(\\.\\./)+(api|activities|worker|workflows|app)(/|$)',
          message: 'lib/ imports nothing from api/, activities/, worker/, workflows/ or app/: the dependency points the other way.',
        }, sandboxInternals, sandboxPackage],
      }],
    },
  },
  {
    // Activities and the API meet workflows only through contract/ (types, signal,
    // query and workflow names), never through a workflow's own module, and meet each
    // other only in lib/ (the rules both apply) and app/ (which wires them together).
    files: ['activities/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [{
          regex: '^(\\.\\./)+(workflows|worker|app|api)(/|$)',
          message: 'Activities take workflow-facing names from contract/ and shared rules from lib/, and are wired in app/: no imports from workflows/, worker/, app/ or api/.',
        }, sandboxInternals, sandboxPackage],
      }],
    },
  },
  {
    files: ['api/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [{
          regex: '^(\\.\\./)+(workflows|worker|app|activities)(/|$)',
          message: 'The API takes workflow-facing names from contract/ and the rules it shares with activities from lib/, and is wired in app/: no imports from workflows/, worker/, app/ or activities/.',
        }, sandboxInternals, sandboxPackage],
      }],
    },
  },
  {
    // The worker runs workflows and activities: it is wired in app/ and knows nothing of
    // the API or the CLI.
    files: ['worker/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [{
          regex: '^(\\.\\./)+(api|app|cli)(/|$)',
          message: 'worker/ is wired in app/ and serves workflows and activities: no imports from api/, app/ or cli/.',
        }, sandboxInternals, sandboxPackage],
      }],
    },
  },
  {
    // app/ and main.ts are the composition root: they may wire any layer of the product,
    // but the CLI is a separate program and the sandbox is reached through its entry point.
    files: ['app/**/*.ts', 'main.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [{
          regex: '^(\\./|(\\.\\./)+)cli(/|$)',
          message: 'The service does not load the CLI: cli/ is a client of the HTTP API.',
        }, sandboxInternals, sandboxPackage],
      }],
    },
  },
  // The sandbox is a package of its own (@qemurun/sandbox), standing in for Proxmox: it
  // imports nothing outside its folder, neither the service it is tested with nor lib/ or
  // contract/. What it needs of theirs it has a copy of, or is given by its caller.
  ...sandboxDepths.map((depth) => ({
    files: [`sandbox/${'*/'.repeat(depth)}*.ts`],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [{
          regex: `^(\\.\\./){${depth + 1},}`,
          message: 'sandbox/ is a package of its own: it imports nothing outside its folder (copy the helper, or let the caller pass the value in).',
        }, {
          regex: '^@qemurun/sandbox(/|$)',
          message: 'Inside the sandbox, import its modules by relative path.',
        }],
      }],
    },
  })),
  // test/ and scripts/ may import anything: they set the pieces up and look inside them.
  {
    // The CLI is a client of the HTTP API and nothing else: it loads none of the service's
    // code, so it starts fast and works against any server that speaks the API. Types only.
    files: ['cli/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [{
          regex: '^(\\.\\./)+(api|activities|worker|workflows|app|lib|sandbox|contract)(/|$)',
          allowTypeImports: true,
          message: 'cli/ talks to QemuRun over HTTP only: import types from the service, never its code.',
        }, sandboxPackage],
      }],
    },
  },
  {
    // No hidden process-wide state: what a module needs is made at a composition root
    // (app/, main.ts) and passed in, so two services, apps or test files in one process
    // never share it by accident. A constant lookup table says so in its type (ReadonlySet).
    // Process-wide by nature (a file on disk, one process's lock) is said next to the use.
    // Every folder of code, the sandbox's, the tests' and the scripts' too, but not the
    // composition roots: each process's own entry point, where its state is made.
    files: ['**/*.ts'],
    ignores: [
      'app/**', 'main.ts',
      // The spawner child's entry point.
      'lib/executor/spawnerProcess.ts',
      // The sandbox's processes: its standalone server (scripts/sandbox.ts), the cluster's REST API server and
      // its task workers, the CLI server and the CLIs, qmeventd, a VM and its QEMU supervisor.
      'scripts/sandbox.ts', 'sandbox/api/server.ts', 'sandbox/api/worker.ts', 'sandbox/cli/server.ts',
      'sandbox/cli/main.ts', 'sandbox/cli/qmeventdMain.ts', 'sandbox/vm/main.ts', 'sandbox/qemu/supervisor.ts',
      // A test file is the root of its own run: jest loads every module afresh for each file.
      // The global setup hands its Temporal server to the teardown on globalThis, jest's way.
      'test/**/*.test.ts', 'sandbox/test/**/*.test.ts', 'test/support/globalSetup.ts', 'test/support/globalTeardown.ts',
    ],
    rules: {
      'no-restricted-syntax': ['error', ...moduleStateBans],
    },
  },
  {
    // import() of the sandbox package is the loader's alone (app/sandbox.ts): the same
    // rule as the block above for the product's folders (one no-restricted-syntax per file),
    // and the only one for the composition roots.
    files: ['api/**/*.ts', 'activities/**/*.ts', 'lib/**/*.ts', 'worker/**/*.ts', 'cli/**/*.ts', 'contract/**/*.ts', 'workflows/**/*.ts'],
    ignores: ['lib/executor/spawnerProcess.ts'],
    rules: {
      'no-restricted-syntax': ['error', ...moduleStateBans, sandboxImportExpression],
    },
  },
  {
    files: ['app/**/*.ts', 'main.ts', 'lib/executor/spawnerProcess.ts'],
    ignores: ['app/sandbox.ts'],
    rules: {
      'no-restricted-syntax': ['error', sandboxImportExpression],
    },
  },
);
