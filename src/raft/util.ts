// Small pure helpers shared by the core's modules.

import type { Entry } from './types.ts';

/** Fixed cost counted for an entry besides its payload (index, term, framing). */
const entryOverheadBytes = 16;
/** Bytes counted for a configuration change entry (small, bounded by its member count). */
const confEntryBytes = 256;

export function entryBytes(e: Entry): number {
  return entryOverheadBytes + (e.kind === 'normal' ? e.data.length : confEntryBytes);
}

export function payloadBytes(entries: readonly Entry[]): number {
  let n = 0;
  for (const e of entries) n += e.kind === 'normal' ? e.data.length : confEntryBytes;
  return n;
}

/** The longest prefix of `entries` within `bytesMax`, but always at least one entry. */
export function limitBytes<T extends Entry>(entries: T[], bytesMax: number): T[] {
  if (entries.length === 0) return entries;
  let size = entryBytes(entries[0] as T);
  let n = 1;
  for (; n < entries.length; n++) {
    size += entryBytes(entries[n] as T);
    if (size > bytesMax) break;
  }
  return n === entries.length ? entries : entries.slice(0, n);
}
