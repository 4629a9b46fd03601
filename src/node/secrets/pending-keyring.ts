// A keyring written to the store by the node's first leader term rather than made then: the one
// `shoal init` prepares (so that the recovery key is shown once, at founding), and the one
// `shoal snapshot restore` leaves for a restored store (its keys opened with the recovery key, or
// new ones when the old secrets are given up). The file, DATA/keyring.pending.json, holds public
// halves and recovery-sealed copies only; the private halves are in DATA/tls/cluster-keys. The
// leader's keyring loop (src/control/secret-keyring.ts) writes it and then deletes the file.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { keyringKeyOf } from '../../control/secret-keyring.ts';
import { keyringSchema, type Keyring } from '../../resources/cluster-keyring.ts';
import { newClusterKey, rawPrivateKey, rawPublicKey } from '../../resources/secret-crypto.ts';
import type { ClusterKeyHolder } from '../../ports/cluster-keys.ts';
import { ClusterKeyFiles, writePrivateFile } from '../../security/cluster-key-files.ts';
import { keyText, recoveryKeyPrefix } from '../../security/unlock-key.ts';

export const pendingKeyringFile = (dataDir: string): string => path.join(dataDir, 'keyring.pending.json');

const pendingSchema = z.object({
  keyring: keyringSchema,
  /** true: replaces the keyring the store holds (a restored store's); false: only where there is none. */
  replace: z.boolean(),
}).strict();
export type PendingKeyring = z.infer<typeof pendingSchema>;

export function writePendingKeyring(dataDir: string, pending: PendingKeyring): void {
  writePrivateFile(pendingKeyringFile(dataDir), `${JSON.stringify(pending, null, 2)}\n`);
}

/** The pending keyring, if the file is there; one that does not parse is reported and ignored. */
export function readPendingKeyring(dataDir: string, warn: (m: string) => void): PendingKeyring | undefined {
  const file = pendingKeyringFile(dataDir);
  if (!existsSync(file)) return undefined;
  const parsed = pendingSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  if (!parsed.success) {
    warn(`${file} is not a keyring this release wrote; ignored (the leader makes a keyring of its own)`);
    return undefined;
  }
  return parsed.data;
}

export function removePendingKeyring(dataDir: string): void {
  rmSync(pendingKeyringFile(dataDir), { force: true });
}

/**
 * Deletes a founding keyring once the store holds one, whoever wrote it: the voters of `shoal dev`
 * that did not lead first keep theirs otherwise. A restored store's (replace) is the leader's to write.
 */
export function dropSupersededPending(dataDir: string): void {
  if (!existsSync(pendingKeyringFile(dataDir))) return;
  if (readPendingKeyring(dataDir, () => undefined)?.replace !== true) removePendingKeyring(dataDir);
}

/** A new recovery key pair: the public half for the keyring, the private half as text, to show once. */
export function newRecoveryKey(): { recovery: NonNullable<Keyring['recovery']>; text: string } {
  const pair = generateKeyPairSync('x25519');
  const recovery = { id: randomBytes(8).toString('hex'), publicKey: rawPublicKey(pair.publicKey).toString('base64'), createdAt: Date.now() };
  return { recovery, text: keyText(recoveryKeyPrefix, rawPrivateKey(pair.privateKey)) };
}

/**
 * A founding keyring: a cluster key (its private half kept in `keys`) sealed to a new recovery
 * key. Answers the keyring and the recovery key's text, which nothing keeps.
 */
export function foundingKeyring(keys: ClusterKeyHolder, retired: readonly string[] = []): { keyring: Keyring; recoveryKey: string } {
  const key = newClusterKey();
  const { recovery, text } = newRecoveryKey();
  keys.add(key.id, key.privateKey);
  const keyring: Keyring = {
    active: key.id, keys: [keyringKeyOf(key, recovery, Date.now())], recovery, retired: retired.slice(-16), scrubbedAt: 0, rotation: null, autolock: null,
  };
  return { keyring, recoveryKey: text };
}

/**
 * The founding keyring of new voters that start together (`shoal init` has one, `shoal dev`
 * several): the same cluster key put in each data directory, and the keyring left pending in each,
 * so whichever leads first writes it. Answers the recovery key's text, to show once.
 */
export function foundKeyring(dataDirs: readonly string[]): string {
  const [first, ...others] = dataDirs.map((d) => ({ dir: d, keys: new ClusterKeyFiles(d) }));
  if (first === undefined) throw new Error('assertion: a founding keyring needs a data directory');
  const { keyring, recoveryKey } = foundingKeyring(first.keys);
  const privateKey = first.keys.privateKey(keyring.active);
  if (privateKey === undefined) throw new Error('assertion: the founding key was just written');
  for (const o of others) o.keys.add(keyring.active, privateKey);
  for (const d of dataDirs) writePendingKeyring(d, { keyring, replace: false });
  return recoveryKey;
}
