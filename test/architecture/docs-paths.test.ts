// The docs name only files that exist: a path written as src/…, fsm/…, transport/…, net/…,
// test/…, bench/… or scripts/… in docs/ or the README must be in the tree.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const pages = ['README.md', ...readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const pathPattern = /\b(?:src|fsm|transport|net|test|bench|scripts)\/[A-Za-z0-9_./-]+\.(?:ts|mjs|js)\b/g;

describe('docs', () => {
  it('name only files that exist', () => {
    const missing: string[] = [];
    for (const page of pages) {
      for (const m of readFileSync(path.join(root, page), 'utf8').matchAll(pathPattern)) {
        if (!existsSync(path.join(root, m[0]))) missing.push(`${page}: ${m[0]}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
