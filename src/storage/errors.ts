// The storage's operating errors. Corruption is not a bug to assert on: disks flip bits and lose
// writes, and the operator needs to know which file is damaged and what to do about it. Both
// errors stop the node from starting; neither is ever turned into a partial, silently shortened
// log.

import type { StoragePaths } from './paths.ts';

/** Stored data failed a check (checksum, framing, continuity). The node must not start on it. */
export class StorageCorruptionError extends Error {
  readonly code = 'storage_corrupt';
  constructor(
    /** The damaged file or directory (a write-ahead log segment, the wal/ directory, the key file, a snapshot, an old LevelDB log/ directory). */
    readonly file: string,
    /** What is wrong, in words. */
    readonly detail: string,
    /** What the operator should do about it. */
    readonly recovery: string,
    options?: { cause?: unknown },
  ) {
    super(`storage is corrupt: ${detail} (in ${file}). To recover: ${recovery}`, options);
    this.name = 'StorageCorruptionError';
  }
}

/** The data directory was written in a format this version does not read. */
export class StorageFormatError extends Error {
  readonly code = 'storage_format';
  constructor(readonly file: string, readonly found: unknown, readonly supported: number) {
    super(`storage format ${String(found)} in ${file} is not supported (this version reads format ${supported}). ` +
      'Run the shoal version that wrote it, or start this node with an empty data directory and let it catch up from the cluster.');
    this.name = 'StorageFormatError';
  }
}

/** Recovery for a node whose own disk cannot be trusted: let the cluster rebuild it. */
export function rebuildNodeRecovery(dir: string): string {
  return `stop this node, move ${dir} aside (keep it for inspection), remove the node from the cluster, ` +
    'then join it again with an empty data directory as a learner so the leader sends it a snapshot. ' +
    'If this node held the last copy of the data, restore the cluster from a saved snapshot instead.';
}

/** Damage in the log as a whole (the write-ahead log), found by the checks at open. */
export function logCorrupt(paths: StoragePaths, detail: string, cause?: unknown): StorageCorruptionError {
  return new StorageCorruptionError(paths.wal, detail, rebuildNodeRecovery(paths.dir), { cause });
}

/** Damage in the LevelDB directory of an older release, found while moving it (migrate.ts). */
export function levelCorrupt(paths: StoragePaths, detail: string, cause?: unknown): StorageCorruptionError {
  return new StorageCorruptionError(paths.level, detail, rebuildNodeRecovery(paths.dir), { cause });
}
