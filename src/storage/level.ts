// Opening the level database, with LevelDB's own failures turned into errors an operator can
// act on.

import { ClassicLevel } from 'classic-level';
import { ShoalError } from '../errors.ts';
import { StorageCorruptionError, rebuildNodeRecovery } from './errors.ts';
import type { StoragePaths } from './paths.ts';

/** Keys and values are raw bytes: every value is a sealed frame (see sealed.ts). */
export type LogDb = ClassicLevel<Buffer, Buffer>;

export async function openLevel(paths: StoragePaths): Promise<LogDb> {
  const db = new ClassicLevel<Buffer, Buffer>(paths.log, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  try {
    await db.open();
  } catch (err) {
    const why = causeMessage(err);
    if (/corrupt/i.test(why)) {
      throw new StorageCorruptionError(paths.log, `LevelDB refuses to open the log database: ${why}`,
        rebuildNodeRecovery(paths.dir), { cause: err });
    }
    if (/lock/i.test(why)) {
      throw new ShoalError('data_dir_locked', `${paths.dir} is in use by another process (its log database is locked): is another shoal node (or shoal dev) running on it? Stop that one first, or give this one another data directory`, { dataDir: paths.dir });
    }
    throw err;
  }
  return db;
}

// abstract-level wraps the binding's error in a generic "database is not open" error.
function causeMessage(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e instanceof Error && parts.length < 5; e = e.cause) parts.push(e.message);
  return parts.join(': ');
}
