// The agent's planning and label code are pure (design.md: the agent compares and converges;
// the planner is tested with tables): no I/O, clock, randomness or process state. The lint rules
// cover src/raft/ only, so this test reads the sources and holds them to it.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../src');
const pure = ['executor/labels.ts', 'executor/plan-reconcile.ts', 'executor/task-report.ts', 'executor/restart-backoff.ts', 'base/backoff.ts'];
const forbidden: [RegExp, string][] = [
  [/from '(node:|fs|os|net|http|https|child_process|worker_threads|timers|perf_hooks|process|crypto)['/]/, 'a Node.js module'],
  [/\bDate\b/, 'the clock (Date)'],
  [/\bperformance\b/, 'the clock (performance)'],
  [/\bMath\.random\b/, 'global randomness'],
  [/\bprocess\./, 'process state'],
  [/\b(setTimeout|setInterval|setImmediate|queueMicrotask)\b/, 'timers'],
  [/\bconsole\./, 'console output'],
  [/from '\.\/(agent|memory-runtime|docker-runtime|work-queue|status-reporter|runtime-reporter|clock|manual-clock)\.ts'/, 'an impure executor module'],
];

describe('src/executor pure helpers', () => {
  for (const file of pure) {
    it(`${file} touches no I/O, clock or randomness`, () => {
      const code = readFileSync(path.join(root, file), 'utf8').split('\n').filter((l) => !l.trim().startsWith('//')).join('\n');
      for (const [pattern, what] of forbidden) expect(pattern.test(code), `${file} uses ${what}`).toBe(false);
    });
  }
});
