// docs/resources.md documents every field of the Job vocabulary, and no field it does not read.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { jobFieldNames } from '../../../src/resources/spec/index.ts';

const doc = readFileSync(path.resolve(import.meta.dirname, '../../../docs/resources.md'), 'utf8');
const table = doc.slice(doc.indexOf('### Job fields'), doc.indexOf('**Scheduled times.**'));
const firstCells = [...table.matchAll(/^\| ([^|]+)\|/gm)].map((m) => m[1] ?? '');
const documented = new Set(firstCells.flatMap((cell) => [...cell.matchAll(/`([A-Za-z]+)/g)].map((m) => m[1])));

describe('docs/resources.md, Job fields', () => {
  it('lists every Job field the parser reads, and none it does not', () => {
    for (const field of jobFieldNames) expect(documented.has(field), `${field} is not documented`).toBe(true);
    for (const field of documented) expect(jobFieldNames.includes(field as string), `${String(field)} is documented but not read`).toBe(true);
  });
});
