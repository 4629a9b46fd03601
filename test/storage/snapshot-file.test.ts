// The snapshot file format on its own: every single damaged byte and every truncation of a
// small file must be told apart from the good file.

import { describe, expect, it } from 'vitest';
import { decodeSnapshotFile, encodeSnapshotPrefix, snapshotHeader } from '../../src/storage/snapshot-file.ts';
import type { Snapshot } from '../../src/raft/types.ts';
import { conf } from './helpers.ts';

const snap: Snapshot = { meta: { index: 42, term: 3, confState: conf(['a', 'b']) }, data: Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8]) };
const file = Buffer.concat([encodeSnapshotPrefix(snapshotHeader(snap)), snap.data]);

describe('snapshot file format', () => {
  it('round-trips a snapshot', () => {
    const decoded = decodeSnapshotFile(file);
    expect(decoded.ok).toBe(true);
    if (decoded.ok) expect(decoded.snapshot).toEqual(snap);
  });

  it('detects a flip of any bit pattern in any byte', () => {
    for (let i = 0; i < file.length; i++) {
      const bad = Buffer.from(file);
      bad[i] = (bad[i] as number) ^ 0x5a;
      expect(decodeSnapshotFile(bad).ok, `byte ${i}`).toBe(false);
    }
  });

  it('detects every truncation and appended bytes', () => {
    for (let n = 0; n < file.length; n++) expect(decodeSnapshotFile(file.subarray(0, n)).ok, `length ${n}`).toBe(false);
    expect(decodeSnapshotFile(Buffer.concat([file, Buffer.from([0])])).ok).toBe(false);
  });
});
