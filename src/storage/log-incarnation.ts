// The log's incarnation: a random id kept both in the key file (key-file.ts; LevelDB until
// 0.1.x) and in a file next to it (<data>/log.id). A node whose log vanished, or was swapped for another one, but whose
// identity stayed would otherwise start empty under its old node id: it may have voted in the
// current term or acknowledged entries that it no longer remembers, so it could vote twice or
// help elect a leader that lacks committed entries. Such a start is refused, with what to do.

import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { StorageCorruptionError } from './errors.ts';
import { writeFileDurably, type KeyFile } from './key-file.ts';
import { metaKey } from './keys.ts';
import type { StoragePaths } from './paths.ts';
import { readRecord } from './recover.ts';
import { seal } from './sealed.ts';

const logIdKey = metaKey('logId');
const logIdSchema = z.object({ logId: z.string().min(1).max(64) }).strict();

export function logIdPath(paths: StoragePaths): string {
  return join(paths.dir, 'log.id');
}

const rejoinRecovery = (dir: string): string =>
  'do not start this node under its old id. Remove it from the cluster (shoal cluster member remove ID, on a running member), ' +
  `move ${dir} aside, run shoal init again (a new identity) and add the node back; it receives the data from the leader`;

/** Gives a new log its id, or checks that the log is the one this data directory had. */
export async function checkLogIncarnation(keys: KeyFile, paths: StoragePaths): Promise<void> {
  const stored = readRecord(keys, logIdKey, logIdSchema, paths)?.logId;
  const file = logIdPath(paths);
  const expected = existsSync(file) ? (await readFile(file, 'utf8')).trim() : undefined;
  if (stored === undefined && expected !== undefined) {
    throw new StorageCorruptionError(paths.log,
      `the log is new or was replaced, but ${file} shows this node had log ${expected}: it may have voted or acknowledged entries it no longer remembers`,
      rejoinRecovery(paths.dir));
  }
  if (stored !== undefined && expected !== undefined && stored !== expected) {
    throw new StorageCorruptionError(paths.log, `the log is log ${stored}, but ${file} says this node's log is ${expected}: the log comes from another node or another life of this one`,
      rejoinRecovery(paths.dir));
  }
  const id = stored ?? randomUUID();
  if (stored === undefined) await keys.put([[logIdKey, seal({ logId: id })]]);
  // Written after the key file holds the id: a crash in between leaves a log with an id and no
  // file, which the next start repairs (as for a log made before log ids existed).
  if (expected === undefined) await writeFileDurably(file, `${id}\n`);
}
