// Where a node's storage lives inside its data directory.

import { join } from 'node:path';

export interface StoragePaths {
  /** The data directory given to DiskStorage.open. */
  dir: string;
  /**
   * The key file (key-file.ts): the storage format, the log's id, node metadata. Named `log`
   * because it took the place of the LevelDB directory that held these keys (and, in storage
   * format 1, the log): callers that list what the storage owns keep working.
   */
  log: string;
  /** Where releases up to 0.1.x kept the keys in LevelDB: copied into the key file, kept for a rollback, renamed aside at the first change (migrate.ts). */
  level: string;
  /** The write-ahead log's segment files: entries, hard state, snapshot record, compaction point. */
  wal: string;
  /** Snapshot files. */
  snapshots: string;
  /** The lock of the open storage (dir-lock.ts). */
  lock: string;
}

export function storagePaths(dir: string): StoragePaths {
  return {
    dir, log: join(dir, 'storage.keys'), level: join(dir, 'log'), wal: join(dir, 'wal'), snapshots: join(dir, 'snapshots'),
    lock: join(dir, 'storage.lock'),
  };
}

/** Where the LevelDB directory is renamed once moved: log.moved, or log.moved-2, -3... if taken. */
export function levelAsideName(n: number): string {
  return n === 1 ? 'log.moved' : `log.moved-${n}`;
}
