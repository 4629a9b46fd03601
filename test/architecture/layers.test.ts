// The folder graph (scripts/layers.mjs) is a DAG, the imports as they are follow it, and no two
// files import each other in a circle. Lint enforces the table import by import
// (scripts/eslint-layers.mjs); this test checks the table itself and the whole graph at once.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { folderOf, layers } from '../../scripts/layers.mjs';

const root = path.resolve(import.meta.dirname, '../..');

function sources(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) out.push(rel);
    }
  };
  for (const d of ['src', 'fsm', 'transport', 'net']) walk(d);
  return out;
}

/** Every relative import of every source file, resolved to a path from the root. */
function imports(): Map<string, string[]> {
  const g = new Map<string, string[]>();
  for (const f of sources()) {
    const targets: string[] = [];
    for (const m of readFileSync(path.join(root, f), 'utf8').matchAll(/(?:import|export)[^'"]*?from\s+['"](\.[^'"]+)['"]/g)) {
      targets.push(path.normalize(path.join(path.dirname(f), m[1] as string)));
    }
    g.set(f, targets);
  }
  return g;
}

/** A cycle of `graph`, as the list of its nodes, or null. */
function findCycle(graph: Map<string, readonly string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const visit = (n: string, stack: string[]): string[] | null => {
    state.set(n, 'open');
    for (const m of graph.get(n) ?? []) {
      if (state.get(m) === 'open') return [...stack.slice(stack.indexOf(m)), m];
      if (state.get(m) === undefined && graph.has(m)) {
        const c = visit(m, [...stack, m]);
        if (c !== null) return c;
      }
    }
    state.set(n, 'done');
    return null;
  };
  for (const n of graph.keys()) {
    if (state.get(n) !== undefined) continue;
    const c = visit(n, [n]);
    if (c !== null) return c;
  }
  return null;
}

describe('the folder graph', () => {
  it('as the table declares it, has no cycle', () => {
    expect(findCycle(new Map(Object.entries(layers)))).toBeNull();
  });

  it('as the imports are, uses only edges the table allows, so it has no cycle either', () => {
    const bad: string[] = [];
    for (const [file, targets] of imports()) {
      const from = folderOf(file) as string;
      for (const t of targets) {
        const to = folderOf(t);
        if (to !== null && to !== from && !(layers[from] ?? []).includes(to)) bad.push(`${file} -> ${t}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('has no two files importing each other in a circle', () => {
    expect(findCycle(imports())).toBeNull();
  });

  it('hands the node driver to no module outside src/node and the composition root (the rest hold ports)', () => {
    const holders = [...imports()].filter(([file, targets]) => !/^src\/(node|server)\//.test(file) && targets.includes(path.normalize('src/node/raft-node.ts')));
    expect(holders.map(([f]) => f)).toEqual([]);
  });

  it('is enforced by lint, import by import', async () => {
    const eslint = new ESLint({ cwd: root });
    const [result] = await eslint.lintText("import { RaftNode } from '../node/raft-node.ts';\nexport type X = RaftNode;\n", { filePath: path.join(root, 'src/control/bad.ts') });
    expect(result?.messages.map((m) => m.ruleId)).toContain('shoal/layers');
    expect(result?.messages.find((m) => m.ruleId === 'shoal/layers')?.message).toContain('src/control may not import src/node');
  });
});
