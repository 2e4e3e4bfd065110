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
/** Packages that run in the workflow sandbox; everything else on npm is Node-side. */
const sandboxPackages = ['@temporalio/workflow', '@temporalio/common', 'zod'];
const nodeSidePackages = {
  regex: `^(?!\\.|(${sandboxPackages.map((p) => p.replace('/', '\\/')).join('|')})$)`,
  message: `Node-side package: code bundled into the workflow sandbox uses ${sandboxPackages.join(', ')} only.`,
};

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
  { ignores: ['node_modules/', 'dist/', '.tools/', 'data/', 'test-artifacts/', '**/*.js', '**/*.mjs'] },
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
          nodeSidePackages,
          {
            regex: `^\\.\\./(?!(contract${workflowLib.map((m) => `|lib/${m}`).join('')})$)`,
            message: 'Workflow code imports only ../contract (and the pure lib/ modules eslint.config.mjs lists) besides other workflow files.',
          },
        ],
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
        }],
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
        }],
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
        }],
      }],
    },
  },
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
        }],
      }],
    },
  },
  {
    // No hidden process-wide state: what a module needs is made at a composition root
    // (app/, main.ts) and passed in, so two services, apps or test files in one process
    // never share it by accident. A constant lookup table says so in its type (ReadonlySet).
    // Process-wide by nature (a file on disk, one process's lock) is said next to the use.
    files: ['api/**/*.ts', 'activities/**/*.ts', 'contract/**/*.ts', 'lib/**/*.ts', 'worker/**/*.ts', 'workflows/**/*.ts', 'cli/**/*.ts'],
    // The spawner child's own entry point is the composition root of that process.
    ignores: ['lib/executor/spawnerProcess.ts'],
    rules: {
      'no-restricted-syntax': ['error', ...moduleStateBans],
    },
  },
);
