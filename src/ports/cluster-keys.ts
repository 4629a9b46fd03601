// The port to the cluster keys a node holds (src/security/cluster-key-files.ts): the private halves
// of the keys that wrap the secrets' data keys (src/resources/secret-crypto.ts). Only voters hold
// them; with autolock they are sealed on disk until the node is unlocked.

import type { KeyObject } from 'node:crypto';

export interface ClusterKeyHolder {
  /** The private half of cluster key `id`, when this node holds it and is not locked. */
  privateKey(id: string): KeyObject | undefined;
  /** The ids of the keys this node holds, whether locked or not. */
  heldIds(): string[];
  /** Autolock: the keys are sealed with the unlock key, which this node does not have yet. */
  readonly locked: boolean;
  /** Keeps a key: durable (written and synced) when it returns. */
  add(id: string, privateKey: KeyObject): void;
  /** Forgets a key (a retired one), on disk too. */
  remove(id: string): void;
}

/**
 * Autolock on one node (src/security/node-lock.ts): every key it keeps on disk (cluster keys, CA
 * keys) sealed with the unlock key, which the node holds in memory only, once unlocked.
 */
export interface NodeKeyLock {
  /** Keys are sealed on disk and this process has not been given the unlock key. */
  readonly locked: boolean;
  /** The unlock key this process holds (it was unlocked, or turned autolock on), if any. */
  heldUnlockKey(): Buffer | undefined;
  /** Opens the sealed keys with `unlockKey`; throws, and stays locked, if it does not open them. */
  unlock(unlockKey: Buffer): void;
  /** Seals every key on disk with `unlockKey` (autolock on, or a new unlock key), or writes them in the clear (null: off). */
  autolock(unlockKey: Buffer | null): void;
  /** Calls `listener` after each successful unlock (the agents that wait for it act at once); returns an unsubscribe. */
  onUnlocked?(listener: () => void): () => void;
}
