// The scheduler and the spec parser are pure: no I/O, no clock, no randomness, no process
// state (design.md: "The scheduler is a pure function"). The lint rules that enforce this for
// src/raft/ do not cover src/control/, so this test reads the sources and holds them to it.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../../src');
const pureDirs = ['control/scheduler', 'resources/spec'];
const forbidden: [RegExp, string][] = [
  [/from '(node:|fs|os|net|http|https|child_process|worker_threads|timers|perf_hooks|process|crypto)['/]/, 'a Node.js module'],
  [/\bDate\b/, 'the clock (Date)'],
  [/\bperformance\b/, 'the clock (performance)'],
  [/\bMath\.random\b/, 'global randomness'],
  [/\bprocess\./, 'process state'],
  [/\b(setTimeout|setInterval|setImmediate|queueMicrotask)\b/, 'timers'],
  [/\bconsole\./, 'console output'],
];

describe('src/control/scheduler and src/control/spec', () => {
  for (const dir of pureDirs) {
    for (const file of readdirSync(path.join(root, dir)).filter((f) => f.endsWith('.ts'))) {
      it(`${dir}/${file} touches no I/O, clock or randomness`, () => {
        const code = readFileSync(path.join(root, dir, file), 'utf8').split('\n').filter((l) => !l.trim().startsWith('//')).join('\n');
        for (const [pattern, what] of forbidden) expect(pattern.test(code), `${dir}/${file} uses ${what}`).toBe(false);
      });
    }
  }
});
