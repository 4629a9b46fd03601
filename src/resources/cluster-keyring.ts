// The cluster keyring: which cluster keys wrap the secrets' data keys (secret-crypto.ts), one
// record in the reserved collection `shoal.cluster-keys/keyring`. It holds public halves only,
// and each private half sealed to the recovery key (which the cluster never keeps); the private
// halves themselves live on the voters' disks (src/security/cluster-key-files.ts). Written by the
// leader's keyring loop (src/control/secret-keyring.ts), each write a compare-and-set on its
// revision. docs/security.md, "Secrets at rest".

import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { DocumentStore } from '../../fsm/index.ts';
import { wrappedKeySchema, type PublicClusterKey } from './secret-crypto.ts';

export const clusterKeysCollection = 'shoal.cluster-keys';
export const keyringId = 'keyring';
/** What each voter holds, by node id: `{keys, locked}`, written by that node. */
export const clusterKeyHoldersCollection = 'shoal.cluster-key-holders';

/** How many retired key ids the keyring remembers (their files are deleted wherever they are found). */
export const retiredKeysMax = 16;

const keyId = z.string().regex(/^[0-9a-f]{16}$/);
const rawKey = z.string().regex(/^[A-Za-z0-9+/]{43}=$/);
const nat = z.number().int().min(0);

export const keyringKeySchema = z.object({
  id: keyId,
  /** The X25519 public key, raw, base64. */
  publicKey: rawKey,
  createdAt: nat,
  /** The private key sealed to the recovery key (its `keyId` is the recovery key's id), or null when there was none. */
  recovery: wrappedKeySchema.nullable(),
}).strict();
export type KeyringKey = z.infer<typeof keyringKeySchema>;

export const rotationPhases = ['adding', 'rewrapping'] as const;
export type RotationPhase = typeof rotationPhases[number];

export const keyringSchema = z.object({
  /** The key new values are wrapped by. */
  active: keyId,
  keys: z.array(keyringKeySchema).min(1).max(4),
  /** The recovery key's public half (restores the cluster keys from a snapshot), or null. */
  recovery: z.object({ id: keyId, publicKey: rawKey, createdAt: nat }).strict().nullable(),
  /** Keys taken out of use: their files are deleted from every voter. */
  retired: z.array(keyId).max(retiredKeysMax),
  /**
   * The store revision from which no plain value of a secret is left in the store (its records
   * re-encrypted, its watch events compacted): each node then rewrites its log and snapshot files
   * without what came before (src/node/secret-purge.ts). Null: the cluster never held plain values.
   */
  scrubbedAt: nat.nullable(),
  /** `shoal secret rotate-key` under way, or null. */
  rotation: z.object({
    id: keyId, from: keyId, to: keyId, phase: z.enum(rotationPhases), startedAt: nat, startedBy: z.string().max(256),
  }).strict().nullable(),
  /**
   * Autolock (`shoal cluster autolock on`): the voters keep their keys sealed with the unlock key,
   * named here by the first 16 hex digits of its SHA-256 (a check, never the key); null: off.
   */
  autolock: z.object({ unlockKeyId: keyId, since: nat }).strict().nullable(),
}).strict();
export type Keyring = z.infer<typeof keyringSchema>;

export const keyHoldingSchema = z.object({
  keys: z.array(keyId).max(8),
  /** Autolocked and not unlocked: it holds the keys but cannot use them. */
  locked: z.boolean(),
}).strict();
export type KeyHolding = z.infer<typeof keyHoldingSchema>;

/** The keyring in `store` with its revision, or undefined when there is none (or it does not parse). */
export function readKeyring(store: Pick<DocumentStore, 'get'>): { keyring: Keyring; rev: number } | undefined {
  const d = store.get(clusterKeysCollection, keyringId);
  if (d === undefined) return undefined;
  const r = keyringSchema.safeParse(d.doc);
  return r.success ? { keyring: r.data, rev: d.rev } : undefined;
}

/** The id of an unlock key: the first 16 hex digits of its SHA-256. */
export function unlockKeyIdOf(unlockKey: Uint8Array): string {
  return createHash('sha256').update(unlockKey).digest('hex').slice(0, 16);
}

/** The active key's public half. */
export function activeKey(k: Keyring): PublicClusterKey {
  const key = k.keys.find((x) => x.id === k.active);
  if (key === undefined) throw new Error(`assertion: the keyring's active key ${k.active} is not among its keys`);
  return { id: key.id, publicKey: key.publicKey };
}

export function readHoldings(store: Pick<DocumentStore, 'list'>): Map<string, KeyHolding> {
  const out = new Map<string, KeyHolding>();
  for (const d of store.list(clusterKeyHoldersCollection, { limit: 1000 }).items) {
    const r = keyHoldingSchema.safeParse(d.doc);
    if (r.success) out.set(d.id, r.data);
  }
  return out;
}
