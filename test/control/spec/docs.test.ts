// docs/resources.md documents every field of the Service vocabulary, and no field it does not read.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { serviceFieldNames } from '../../../src/resources/spec/index.ts';

const doc = readFileSync(path.resolve(import.meta.dirname, '../../../docs/resources.md'), 'utf8');
const serviceTable = doc.slice(doc.indexOf('### Service fields'), doc.indexOf('### Constraints'));
// The first cell of each row names one or more fields (`capAdd`, `capDrop`; `ports[]`; `update.order`).
const firstCells = [...serviceTable.matchAll(/^\| ([^|]+)\|/gm)].map((m) => m[1] ?? '');
const documented = new Set(firstCells.flatMap((cell) => [...cell.matchAll(/`([A-Za-z]+)/g)].map((m) => m[1])));

describe('docs/resources.md', () => {
  it('lists every Service field the parser reads', () => {
    for (const field of serviceFieldNames) expect(documented.has(field), `${field} is not documented`).toBe(true);
  });

  it('lists no Service field the parser does not read', () => {
    for (const field of documented) expect(serviceFieldNames.includes(field as string), `${String(field)} is documented but not read`).toBe(true);
  });
});
