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
