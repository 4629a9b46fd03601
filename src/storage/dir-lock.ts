// One process at a time on a data directory: <data>/storage.lock, created exclusively (O_EXCL)
// while the storage is open, holding the owner's process id and a random token. LevelDB's LOCK
// file did this until LevelDB went (migrate.ts); Node has no fcntl lock, so a lock left by a
// process that died (kill -9, power cut) is told apart by its process id: if no process has that
// id, or it is this very process and the lock is not one this process holds, the lock is stale
// and taken over (with a warning). A living process that holds the id of a dead node (reused ids,
// rare outside containers) keeps the directory refused until the operator removes the file: the
// error says so.

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { open, readFile, unlink } from 'node:fs/promises';
import { ShoalError } from '../errors.ts';
import type { Logger } from '../raft/types.ts';
import type { StoragePaths } from './paths.ts';
import { processAlive } from '../base/process-alive.ts';

/** Lock files this process holds (a second open in the same process is refused too). */
const held = new Set<string>();

export interface DirLock {
  release(): Promise<void>;
}

export async function lockDataDir(paths: StoragePaths, logger: Logger): Promise<DirLock> {
  const file = paths.lock;
  const token = `${process.pid} ${randomUUID()}\n`;
  for (let attempt = 0; ; attempt++) {
    try {
      const fh = await open(file, 'wx');
      try {
        await fh.writeFile(token);
      } finally {
        await fh.close();
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = ownerOf(file);
    // A second EEXIST: another process took the stale lock over at the same moment.
    if (attempt > 0 || (owner !== undefined && (held.has(file) || (owner !== process.pid && processAlive(owner))))) {
      throw new ShoalError('data_dir_locked', `${paths.dir} is in use by another process (process ${owner ?? 'unknown'} holds ${file}): is another shoal node (or shoal dev) running on it? ` +
        'Stop that one first, or give this one another data directory. If no shoal process has that id (the one that held it died and the id was reused), remove the file',
      { dataDir: paths.dir });
    }
    logger.warn(`took over the stale lock ${file} (process ${owner ?? 'unknown'} no longer runs: it stopped without closing its storage)`);
    await unlink(file).catch(() => undefined);
  }
  held.add(file);
  return {
    async release(): Promise<void> {
      held.delete(file);
      // Only our own lock: after a recovery the directory may hold another one.
      const now = await readFile(file, 'utf8').catch(() => undefined);
      if (now === token) await unlink(file).catch(() => undefined);
    },
  };
}

function ownerOf(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').split(' ')[0]);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

