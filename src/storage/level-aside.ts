// The LevelDB directory of a release up to 0.1.x (<data>/log) after its keys were copied into
// the key file: kept in place while it holds the same keys, so a rollback to that release (which
// reads it) still works; renamed aside, never deleted, before the first change it would not see.

import { existsSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../raft/types.ts';
import { levelAsideName, type StoragePaths } from './paths.ts';
import { syncDir } from './sync-dir.ts';

/** Whether the data directory still has the LevelDB directory of an older release. */
export function hasLevelDir(paths: StoragePaths): boolean {
  return existsSync(join(paths.level, 'CURRENT'));
}

/** Renames <data>/log to <data>/log.moved (or log.moved-2, ...), synced; returns the new path. */
export async function setLevelAside(paths: StoragePaths, logger: Logger, why: string): Promise<string> {
  let n = 1;
  while (existsSync(join(paths.dir, levelAsideName(n)))) n++;
  const aside = join(paths.dir, levelAsideName(n));
  await rename(paths.level, aside);
  await syncDir(paths.dir);
  logger.info(`renamed the LevelDB directory ${paths.level} to ${aside} (${why}): nothing reads it any more; ` +
    'delete it once this node runs as it should');
  return aside;
}
