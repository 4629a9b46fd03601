// Autolock on one node (docs/security.md, "Autolock"): the cluster keys (cluster-key-files.ts)
// and the CA keys (key-vault.ts) on its disk are sealed with the unlock key, which the node holds
// in memory only. After a restart it is locked: it serves the store, but cannot decrypt a secret,
// hand a key to another node or sign a certificate until it is given the unlock key again
// (`shoal unlock`, or an unlocked peer with secrets.peerUnlock).

import type { NodeKeyLock } from '../ports/cluster-keys.ts';
import { caKeyFile } from './authority.ts';
import { caNextKeyFile } from './ca-rotation-authority.ts';
import type { ClusterKeyFiles } from './cluster-key-files.ts';
import { isLocked, readKeyFile, resealKeyFiles, sealedFileOf, setUnlockKey } from './key-vault.ts';
import { existsSync } from 'node:fs';

export class NodeLock implements NodeKeyLock {
  private readonly unlockedListeners = new Set<() => void>();

  constructor(private readonly dataDir: string, private readonly clusterKeys: ClusterKeyFiles) {
    // A node starting on this directory starts locked, even in a process that ran it before (tests).
    setUnlockKey(dataDir, undefined);
  }

  get locked(): boolean {
    return this.clusterKeys.locked || isLocked(this.dataDir);
  }

  heldUnlockKey(): Buffer | undefined {
    return this.clusterKeys.heldUnlockKey();
  }

  unlock(unlockKey: Buffer): void {
    // Checked on the CA keys first: a wrong key leaves everything as it was.
    setUnlockKey(this.dataDir, unlockKey);
    try {
      for (const f of this.caFiles()) if (existsSync(sealedFileOf(f))) readKeyFile(f);
      this.clusterKeys.unlock(unlockKey);
    } catch (err) {
      setUnlockKey(this.dataDir, undefined);
      throw err;
    }
    for (const l of this.unlockedListeners) l();
  }

  onUnlocked(listener: () => void): () => void {
    this.unlockedListeners.add(listener);
    return () => this.unlockedListeners.delete(listener);
  }

  autolock(unlockKey: Buffer | null): void {
    if (this.locked) throw new Error('this node is locked: unlock it first (shoal unlock)');
    resealKeyFiles(this.dataDir, this.caFiles(), unlockKey);
    this.clusterKeys.reseal(unlockKey);
    setUnlockKey(this.dataDir, unlockKey ?? undefined);
  }

  private caFiles(): string[] {
    return [caKeyFile(this.dataDir), caNextKeyFile(this.dataDir)];
  }
}
