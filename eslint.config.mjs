// @ts-check
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

/**
 * Lint rules that guard the architecture, not the formatting: promises that nobody awaits,
 * what workflow code may import (it runs in Temporal's deterministic sandbox, bundled
 * without Node), and which way imports point between layers.
 */

const nodeBuiltins = builtinModules.filter((m) => !m.startsWith('_'));

/** What workflow code shares with the rest of the product: types, failure names, search attributes, input schemas, the owner marker. */
const workflowContract = ['../lib/types', '../lib/failures', '../lib/temporal/searchAttributes', '../lib/inputs', '../lib/ownership'];

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
    // packages, and from the project only the shared contract. Type imports are erased at
    // build time, so `import type { Activities }` stays allowed.
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: nodeBuiltins.map((name) => ({
          name,
          message: 'Node built-ins do not exist in the workflow sandbox: do this in an activity.',
        })),
        patterns: [
          {
            group: ['node:*'],
            message: 'Node built-ins do not exist in the workflow sandbox: do this in an activity.',
          },
          {
            regex: `^\\.\\./(?!(${workflowContract.map((p) => p.slice(3)).join('|')})$)`,
            allowTypeImports: true,
            message: `Workflow code value-imports only the contract (${workflowContract.join(', ')}) and other workflow files; import activities and the rest as types.`,
          },
          {
            group: ['@temporalio/*', '!@temporalio/workflow', '!@temporalio/common', 'execa', 'ssh2', 'express', 'dotenv'],
            allowTypeImports: true,
            message: 'Node-side package: workflow code uses @temporalio/workflow and @temporalio/common only.',
          },
        ],
      }],
    },
  },
  {
    // lib/ is the library layer: the service's parts use it, it uses none of them.
    files: ['lib/**/*.ts'],
    ignores: [
      // Known exception: lib/service.ts wires the API, the worker and the activities
      // together. It is the composition root and moves out of lib/ (to main.ts/app/); until
      // then it is the one lib file allowed to import the layers above.
      'lib/service.ts',
    ],
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
);
