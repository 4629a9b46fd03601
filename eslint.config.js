// Lint rules. The important ones keep src/raft/ pure: the consensus core must be a
// deterministic function of its inputs, so it may not touch I/O, timers, clocks, process
// state or global randomness. Time is ticks; randomness is a seeded PRNG passed in the config.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { layersPlugin } from './scripts/eslint-layers.mjs';

const impureModules = [
  'fs', 'net', 'tls', 'http', 'https', 'http2', 'dgram', 'dns', 'os', 'crypto', 'child_process',
  'cluster', 'worker_threads', 'timers', 'timers/promises', 'perf_hooks', 'process', 'readline',
  'stream', 'events', 'async_hooks', 'vm', 'v8', 'zlib',
];

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'coverage/**', '.shoal-dev/**', 'sim-failures/**', 'bench/.builds/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['bin/**/*.js', 'scripts/**/*.mjs', 'test/fixtures/**/*.mjs', '*.config.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', fetch: 'readonly', setTimeout: 'readonly' } },
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    // Who may import whom (scripts/layers.mjs), and short functions (style.md: about 70 lines).
    files: ['src/**/*.ts', 'fsm/**/*.ts', 'transport/**/*.ts', 'net/**/*.ts'],
    ignores: ['**/*.test.ts'],
    plugins: { shoal: layersPlugin },
    rules: {
      'shoal/layers': 'error',
      'max-lines-per-function': ['warn', { max: 70, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // One command runner (src/base/run-command.ts; docs/architecture.md, "Running other
    // programs"): only it, and the launchers of the three long-lived processes, start a process.
    // Before the src/raft/ block, whose stricter no-restricted-imports replaces this one there.
    files: ['src/**/*.ts', 'net/**/*.ts', 'transport/**/*.ts', 'fsm/**/*.ts'],
    ignores: ['src/base/run-command.ts', 'src/cli/dev-supervisor.ts', 'src/node/drill/drill-actions.ts', 'net/wg.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        paths: ['node:child_process', 'child_process'].map((name) => ({ name, message: 'Run programs through src/base/run-command.ts (runCommand): a timeout, bounded output and a typed error on every call.' })),
      }],
    },
  },
  {
    // One order for text (src/base/order.ts): by code unit, the same on every machine and Node.js;
    // localeCompare's depends on ICU, and its first call costs a node's start and memory.
    // Before the src/raft/ block, whose own no-restricted-properties replaces this one there.
    files: ['src/**/*.ts', 'net/**/*.ts', 'transport/**/*.ts', 'fsm/**/*.ts'],
    rules: {
      'no-restricted-properties': ['error',
        { property: 'localeCompare', message: 'Order text with compareText or compareNatural (src/base/order.ts): the same on every machine.' },
      ],
    },
  },
  {
    files: ['src/raft/**/*.ts'],
    ignores: ['src/raft/**/*.test.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['node:*'], message: 'src/raft/ is pure: no Node.js modules.' }],
        paths: impureModules.map((name) => ({ name, message: 'src/raft/ is pure: no I/O modules.' })),
      }],
      'no-restricted-globals': ['error',
        ...['setTimeout', 'setInterval', 'setImmediate', 'clearTimeout', 'clearInterval', 'clearImmediate',
          'queueMicrotask', 'process', 'Buffer', 'performance', 'fetch', 'globalThis', 'global', 'window',
          'crypto', 'console', 'Date', 'require']
          .map((name) => ({ name, message: `src/raft/ is pure: '${name}' is I/O, time or global state.` })),
      ],
      'no-restricted-properties': ['error',
        { object: 'Math', property: 'random', message: 'Use the seeded PRNG from the config.' },
      ],
      'no-restricted-syntax': ['error',
        { selector: 'ImportExpression', message: 'src/raft/ is pure: no dynamic imports.' },
      ],
    },
  },
);
