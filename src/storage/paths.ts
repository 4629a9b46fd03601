// Where a node's storage lives inside its data directory.

import { join } from 'node:path';

export interface StoragePaths {
  /** The data directory given to DiskStorage.open. */
  dir: string;
  /** The level database: log entries, hard state, snapshot record, node metadata. */
  log: string;
  /** Snapshot files. */
  snapshots: string;
}

export function storagePaths(dir: string): StoragePaths {
  return { dir, log: join(dir, 'log'), snapshots: join(dir, 'snapshots') };
}
