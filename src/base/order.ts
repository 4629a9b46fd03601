// How shoal orders text: by UTF-16 code unit, never by locale. `localeCompare` orders by the ICU
// collation of the Node.js it runs on, which another Node.js (a node upgraded before the rest)
// may order otherwise: the leader's loops, the apply and the views each node renders must sort
// alike on every member. Its first call also costs a node about 8 ms of its start (building a
// collator) and the pages of ICU's data it reads (about 2 MiB of resident memory; issue 45,
// bench/RESULTS.md "Footprint levers"). A lint rule keeps localeCompare out (eslint.config.js).

/** Code-unit order: the same on every machine, 'B' before 'a', '-' before digits and letters. */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const digitRuns = /(\d+)/;

/**
 * Code-unit order except that runs of digits compare by value: 'n2' before 'n10', '10.0.0.9'
 * before '10.0.0.10', slot '2' before '10'. Equal values written differently ('07' and '7')
 * fall back to code-unit order, so the order is total.
 */
export function compareNatural(a: string, b: string): number {
  if (a === b) return 0;
  const pa = a.split(digitRuns);
  const pb = b.split(digitRuns);
  const n = Math.min(pa.length, pb.length);
  for (let i = 0; i < n; i++) {
    const x = pa[i] ?? '';
    const y = pb[i] ?? '';
    if (x === y) continue;
    // split with a capture group alternates text (even) and digit runs (odd).
    const d = i % 2 === 1 ? compareDigits(x, y) : 0;
    return d !== 0 ? d : compareText(x, y);
  }
  // Every part alike up to the shorter: the one with fewer parts first (a prefix of the other).
  return pa.length - pb.length || compareText(a, b);
}

/** Two runs of digits by value, however long (no Number overflow): 0 when equal in value. */
function compareDigits(x: string, y: string): number {
  const u = x.replace(/^0+(?=\d)/, '');
  const v = y.replace(/^0+(?=\d)/, '');
  return u.length - v.length || compareText(u, v);
}
