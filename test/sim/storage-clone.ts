// A deep copy of a MemoryStorage through its public interface, used to turn a node's durable disk
// image into the storage of its next life. The snapshot may be newer than the compaction point
// (snapshot taken, log not compacted yet), which the copy keeps.

import { MemoryStorage } from '../../src/raft/storage.ts';

export function cloneStorage(src: MemoryStorage): MemoryStorage {
  const dst = new MemoryStorage();
  const snap = src.snapshot();
  const offset = src.firstIndex() - 1;
  const last = src.lastIndex();
  if (offset > 0) {
    if (offset === snap.meta.index) dst.applySnapshot(snap);
    else dst.applySnapshot({ meta: { index: offset, term: src.term(offset), confState: snap.meta.confState }, data: snap.data });
  }
  if (last > offset) dst.append(src.entries(offset + 1, last + 1, Number.POSITIVE_INFINITY));
  if (snap.meta.index > offset) dst.createSnapshot(snap.meta.index, snap.meta.confState, snap.data);
  dst.setHardState(src.hardStateNow());
  return dst;
}
