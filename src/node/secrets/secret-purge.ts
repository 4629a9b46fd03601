// Each node's part in leaving no secret in the clear on its disk (docs/security.md, "Secrets at
// rest"). Once the keyring says from which revision the store holds no plain value
// (`scrubbedAt`, set by the leader after it re-encrypted the secrets written before feature level
// 6 and compacted their watch events), and this node has applied that far, it:
//
//   1. takes a snapshot at its applied index and compacts its whole log behind it,
//   2. rewrites its write-ahead log into one new segment of the entries after that snapshot and
//      deletes every older segment and every other snapshot file (RaftNode.purgeLog), and
//   3. deletes its scheduled snapshot files (backups) of an older index,
//
// then records that it did, in DATA/secrets-purged, so that it happens once per `scrubbedAt`. A
// node that was down meanwhile does it when it has caught up; a crash half-way does it again.

import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ChangeWake, type DocumentStore } from '../../../fsm/index.ts';
import type { Logger } from '../../log.ts';
import { clusterKeysCollection, readKeyring } from '../../resources/cluster-keyring.ts';
import { writePrivateFile } from '../../security/cluster-key-files.ts';
import { backupFilePattern, listBackups } from '../recovery/backups.ts';

/** A check this often besides the keyring's changes (a purge that failed, or waits for this node to apply that far, is tried again sooner: purgeRetryMs). */
export const purgeSweepMs = 60_000;
export const purgeRetryMs = 1_000;

export interface SecretPurgeOptions {
  dataDir: string;
  /** Where scheduled snapshot files are written (config snapshot.dir, default DATA/backups). */
  backupsDir: string;
  store: DocumentStore;
  node: { readonly appliedIndex: number; purgeLog(through: number): Promise<{ snapshot: number; segments: string[]; snapshots: string[] }> };
  log: Logger;
}

export const purgeMarkerFile = (dataDir: string): string => path.join(dataDir, 'secrets-purged');

/** The `scrubbedAt` this node purged its disk for (0: never). */
export function purgedThrough(dataDir: string): number {
  try {
    const n = Number(readFileSync(purgeMarkerFile(dataDir), 'utf8').trim());
    return Number.isSafeInteger(n) && n >= 0 ? n : 0;
  } catch {
    return 0;
  }
}

export class SecretPurge {
  private readonly wake: ChangeWake;
  private closed = false;

  constructor(private readonly o: SecretPurgeOptions) {
    this.wake = new ChangeWake({ store: o.store, collections: [clusterKeysCollection], sweepMs: purgeSweepMs, run: () => this.maybePurge() });
  }

  /** Checks now, then whenever the keyring changes (and every purgeSweepMs). */
  start(): void {
    this.wake.start();
  }

  close(): void {
    this.closed = true;
    this.wake.close();
  }

  /** One check; resolves once done (tests call it). Never throws. */
  async maybePurge(): Promise<void> {
    const through = readKeyring(this.o.store)?.keyring.scrubbedAt ?? null;
    if (through === null || through === 0 || this.closed) return;
    if (purgedThrough(this.o.dataDir) >= through) return;
    if (this.o.node.appliedIndex < through) {
      this.wake.retryIn(purgeRetryMs);
      return;
    }
    try {
      const done = await this.o.node.purgeLog(through);
      const backups = listBackups(this.o.backupsDir).filter((n) => Number(backupFilePattern.exec(n)?.[2] ?? '0') < through);
      for (const b of backups) rmSync(path.join(this.o.backupsDir, b), { force: true });
      writePrivateFile(purgeMarkerFile(this.o.dataDir), `${through}\n`);
      this.o.log.info(`secrets at rest: rewrote this node's log from snapshot ${done.snapshot} and deleted what held secrets in the clear: ` +
        `${done.segments.length} log segment(s), ${done.snapshots.length} snapshot file(s), ${backups.length} scheduled snapshot file(s)`);
    } catch (err) {
      if (!this.closed) this.o.log.warn(`secrets at rest: rewriting this node's log without its plain secrets failed (${(err as Error).message}); trying again`);
      this.wake.retryIn(purgeRetryMs);
    }
  }
}
