// The node's writes to a volume record (issue 41, volume-writer.ts) through a real document
// store: held versions added and forgotten, the last error set and cleared, each a
// compare-and-set that re-reads and retries when another write came first, nothing written
// when nothing changes, and a record that is gone left alone.

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { CommandResult, JsonObject } from '../../fsm/types.ts';
import { StoreVolumeWriter } from '../../src/executor/volumes/volume-writer.ts';
import { volumesCollection, type VolumeRecord } from '../../src/resources/volumes.ts';

const rec: VolumeRecord = {
  name: 'pgdata', service: 'db', copies: 2, everyMs: 30_000, sizeBytes: 1 << 30, eras: [{ node: 'n1', epoch: 0, fromSeq: 1, base: null }], held: [], lastError: null,
};

function setup() {
  const store = new DocumentStore();
  let index = 0;
  let proposals = 0;
  /** Runs before a proposal is applied: another node's write that wins the race. */
  let before: (() => void) | null = null;
  const apply = (data: Uint8Array): CommandResult => store.apply({ index: ++index, term: 1, data, logTimeMs: 1000, featureLevel: 6 });
  const put = (doc: VolumeRecord): void => {
    apply(encodeCommand({ cmd: { op: 'put', collection: volumesCollection, id: doc.name, doc: doc as unknown as JsonObject }, ts: 1, principal: 'shoal:test' }));
  };
  const node = {
    propose: async (data: Uint8Array) => {
      proposals++;
      const race = before;
      before = null;
      race?.();
      return { index: index + 1, result: apply(data) };
    },
  };
  const writer = new StoreVolumeWriter(node, store, 'n2', () => 5000);
  return { store, writer, put, proposals: () => proposals, race: (f: () => void) => { before = f; } };
}

describe('the volume record writer', () => {
  it('adds held versions once, forgets them, sets and clears the last error', async () => {
    const { writer, put, proposals } = setup();
    put(rec);
    const v1 = { seq: 1, node: 'n1', epoch: 0 };
    await writer.recordHeld('pgdata', 'n2', [v1]);
    await writer.recordHeld('pgdata', 'n2', [v1]);
    expect(writer.record('pgdata')?.held).toEqual([{ node: 'n2', version: v1, atMs: 5000 }]);
    expect(proposals()).toBe(1);
    await writer.recordError('pgdata', 'n3: volume_copy_refused');
    expect(writer.record('pgdata')?.lastError).toEqual({ atMs: 5000, message: 'n3: volume_copy_refused' });
    await writer.recordError('pgdata', null);
    expect(writer.record('pgdata')?.lastError).toBeNull();
    await writer.forgetHeld('pgdata', 'n2', [v1]);
    expect(writer.record('pgdata')?.held).toEqual([]);
  });

  it('re-reads and retries when another write came first, keeping both', async () => {
    const { writer, put, race } = setup();
    put(rec);
    const other = { node: 'n3', version: { seq: 1, node: 'n1', epoch: 0 }, atMs: 1 };
    race(() => put({ ...rec, held: [other] }));
    await writer.recordHeld('pgdata', 'n2', [{ seq: 1, node: 'n1', epoch: 0 }]);
    expect(writer.record('pgdata')?.held.map((c) => c.node)).toEqual(['n3', 'n2']);
  });

  it('leaves a record that is gone alone', async () => {
    const { writer, proposals } = setup();
    await writer.recordHeld('pgdata', 'n2', [{ seq: 1, node: 'n1', epoch: 0 }]);
    expect(writer.record('pgdata')).toBeUndefined();
    expect(proposals()).toBe(0);
  });
});
