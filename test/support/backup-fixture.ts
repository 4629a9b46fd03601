// What the backup tests that drive a real BackupRunner share (test/node/backup-stream.test.ts,
// test/node/backup-chain.test.ts, test/volumes/btrfs-backup-chain.test.ts): scratch directories
// removed after the file, a recovery key pair, a store holding a cluster keyring sealed to it, a
// leader that answers the runner, and a directory target `nas`.

import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import type { BackupNode } from '../../src/node/backup/backup-runner.ts';
import { backupTargetsCollection } from '../../src/resources/backup-targets.ts';
import { clusterKeysCollection, keyringId } from '../../src/resources/cluster-keyring.ts';
import { rawPublicKey } from '../../src/resources/secret-crypto.ts';

/** A new directory under the system's temporary one each call; all removed after the test file. */
export function scratchDirs(prefix: string): () => string {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  return () => {
    const d = mkdtempSync(path.join(os.tmpdir(), prefix));
    dirs.push(d);
    return d;
  };
}

export const quietLog = { debug() {}, info() {}, warn() {}, error() {} };

/** The leader the runner asks (term, feature level, a read barrier that passes). */
export const backupNode = {
  id: 'n1', appliedIndex: 100, featureLevel: featureLevelMax, currentTerm: 3, isLeader: true,
  membership: { list: () => [] }, readBarrier: async () => undefined, propose: async () => ({ index: 0 }),
} as unknown as BackupNode;

/**
 * A store with the cluster keyring (its recovery key a fresh X25519 pair), `put` to write more
 * into it, `target` to record a directory target `nas`, and the recovery key's raw private half
 * (what `shoal restore --recovery-key` gives).
 */
export function backupWorld(): { store: DocumentStore; put(collection: string, id: string, doc: unknown): void; target(dir: string, o: { encrypt: boolean; keepDaily?: number; keepWeekly?: number }): void; rawPrivate: Buffer } {
  const recovery = generateKeyPairSync('x25519');
  const rawPrivate = Buffer.from(recovery.privateKey.export({ format: 'jwk' }).d ?? '', 'base64url');
  const publicKey = rawPublicKey(recovery.publicKey).toString('base64');
  const store = new DocumentStore();
  let index = 0;
  const put = (collection: string, id: string, doc: unknown): void => {
    index++;
    const r = store.apply({ index, term: 1, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as Record<string, never> }, ts: 1, principal: 't' }), featureLevel: 10 });
    if (!r.ok) throw new Error(r.error.message);
  };
  put(clusterKeysCollection, keyringId, {
    active: 'aaaaaaaaaaaaaaaa', keys: [{ id: 'aaaaaaaaaaaaaaaa', publicKey, createdAt: 1, recovery: null }],
    recovery: { id: '0123456789abcdef', publicKey, createdAt: 1 }, retired: [], scrubbedAt: null, rotation: null, autolock: null,
  });
  const target = (dir: string, o: { encrypt: boolean; keepDaily?: number; keepWeekly?: number }): void => put(backupTargetsCollection, 'nas', {
    name: 'nas', dir, encrypt: o.encrypt, keepDaily: o.keepDaily ?? 7, keepWeekly: o.keepWeekly ?? 4, intervalMs: 0, secret: null, createdAt: 0, updatedAt: 0,
  });
  return { store, put, target, rawPrivate };
}
