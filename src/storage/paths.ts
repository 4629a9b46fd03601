// Where a node's storage lives inside its data directory.

import { join } from 'node:path';

export interface StoragePaths {
  /** The data directory given to DiskStorage.open. */
  dir: string;
  /** The level database: node metadata, the storage format, the log's id (in format 1, the log). */
  log: string;
  /** The write-ahead log's segment files: entries, hard state, snapshot record, compaction point. */
  wal: string;
  /** Snapshot files. */
  snapshots: string;
}

export function storagePaths(dir: string): StoragePaths {
  return { dir, log: join(dir, 'log'), wal: join(dir, 'wal'), snapshots: join(dir, 'snapshots') };
}
