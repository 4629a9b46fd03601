// What audit records (feature level 4, fsm/audit.ts) cost in apply: the same 50,000 puts of
// ~130-byte documents applied to a fresh store at level 3 (no records) and at level 4 (a record
// and, past 10,000 records, a trim per put), alternating, twice each.
//
//   nice npx tsx bench/audit-apply.ts

import { DocumentStore, encodeCommand } from '../fsm/index.ts';

const puts = 50_000;
const datas = Array.from({ length: puts }, (_, i) => encodeCommand({ cmd: { op: 'put', collection: 'apps', id: `d${i % 5000}`, doc: { i, name: 'x'.repeat(100) } }, ts: 1, principal: 'alice' }));

for (const level of [3, 4, 3, 4]) {
  const store = new DocumentStore();
  const t0 = performance.now();
  for (let i = 0; i < puts; i++) store.apply({ index: i + 1, term: 1, data: datas[i] as Uint8Array, featureLevel: level, logTimeMs: 1_000_000 + i });
  const ms = performance.now() - t0;
  console.log(`level ${level}: ${puts} puts applied in ${ms.toFixed(0)} ms (${Math.round((puts / ms) * 1000)}/s), ${store.stats().documents} documents`);
}
