// Secret values at rest (docs/security.md, "Secrets at rest"). Each value is encrypted with a data
// key of its own (AES-256-GCM, 256 random bits, used for that value only), and the data key is
// wrapped by the cluster key: an X25519 key pair whose public half is in the store (the keyring,
// cluster-keyring.ts) and whose private half only the voters hold, on disk beside the CA key,
// never in the log or a snapshot. Wrapping is ECIES: an ephemeral X25519 key, ECDH with the
// cluster key, HKDF-SHA256, AES-256-GCM. So any node can encrypt a new value (the public key is
// enough), only a holder of the private key can unwrap a data key, and re-wrapping a data key
// under a new cluster key (shoal secret rotate-key) leaves the value's ciphertext as it is.
//
// Every algorithm is named in the record (`alg`), so a later release can add another and read
// both. The associated data binds each ciphertext to the secret's name (and a wrapped key to the
// cluster key's id), so a record's sealed value copied under another name does not open.

import {
  createCipheriv, createDecipheriv, createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync, hkdfSync, randomBytes, type KeyObject,
} from 'node:crypto';
import { z } from 'zod';

export const valueAlgorithm = 'aes-256-gcm';
export const wrapAlgorithm = 'x25519-hkdf-sha256-aes-256-gcm';

const b64 = (max: number) => z.string().max(max).regex(/^[A-Za-z0-9+/]*={0,2}$/);

/** A data key wrapped by a cluster key. */
export const wrappedKeySchema = z.object({
  alg: z.literal(wrapAlgorithm),
  /** The cluster key it is wrapped by (cluster-keyring.ts). */
  keyId: z.string().regex(/^[0-9a-f]{16}$/),
  /** The ephemeral X25519 public key, raw, base64. */
  ephemeral: b64(64),
  iv: b64(32),
  wrapped: b64(128),
  tag: b64(32),
}).strict();
export type WrappedKey = z.infer<typeof wrappedKeySchema>;

/** A value encrypted with its own data key, and that key wrapped. */
export const sealedValueSchema = z.object({
  alg: z.literal(valueAlgorithm),
  iv: b64(32),
  /** At most a 64 KiB value, base64. */
  ciphertext: b64(Math.ceil((64 * 1024) / 3) * 4),
  tag: b64(32),
  key: wrappedKeySchema,
}).strict();
export type SealedValue = z.infer<typeof sealedValueSchema>;

/** A cluster key's public half as the keyring holds it. */
export interface PublicClusterKey {
  id: string;
  /** Raw X25519 public key, base64. */
  publicKey: string;
}

// DER prefixes of an X25519 key in SPKI and PKCS#8: the raw 32 bytes follow.
const spkiPrefix = Buffer.from('302a300506032b656e032100', 'hex');
const pkcs8Prefix = Buffer.from('302e020100300506032b656e04220420', 'hex');

export function publicKeyOf(raw: Uint8Array): KeyObject {
  if (raw.length !== 32) throw new Error(`an X25519 public key is 32 bytes, not ${raw.length}`);
  return createPublicKey({ key: Buffer.concat([spkiPrefix, raw]), format: 'der', type: 'spki' });
}

export function privateKeyOf(raw: Uint8Array): KeyObject {
  if (raw.length !== 32) throw new Error(`an X25519 private key is 32 bytes, not ${raw.length}`);
  return createPrivateKey({ key: Buffer.concat([pkcs8Prefix, raw]), format: 'der', type: 'pkcs8' });
}

export function rawPublicKey(k: KeyObject): Buffer {
  const pub = k.type === 'private' ? createPublicKey(k) : k;
  return pub.export({ format: 'der', type: 'spki' }).subarray(spkiPrefix.length);
}

export function rawPrivateKey(k: KeyObject): Buffer {
  return k.export({ format: 'der', type: 'pkcs8' }).subarray(pkcs8Prefix.length);
}

/** A new cluster key: a random 64-bit id and an X25519 key pair. */
export function newClusterKey(): { id: string; privateKey: KeyObject; publicKey: string } {
  const pair = generateKeyPairSync('x25519');
  return { id: randomBytes(8).toString('hex'), privateKey: pair.privateKey, publicKey: rawPublicKey(pair.publicKey).toString('base64') };
}

/** Whether `privateKey` is the private half of `key`. */
export function isPrivateHalf(privateKey: KeyObject, key: PublicClusterKey): boolean {
  return rawPublicKey(privateKey).equals(Buffer.from(key.publicKey, 'base64'));
}

function valueAad(name: string): Buffer {
  return Buffer.from(`shoal secret value v1\0${name}`);
}

function wrapAad(keyId: string, name: string): Buffer {
  return Buffer.from(`shoal data key v1\0${keyId}\0${name}`);
}

/** The AES key that wraps: HKDF of the shared secret, salted with both public keys. */
function kek(shared: Buffer, ephemeral: Buffer, recipient: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.concat([ephemeral, recipient]), Buffer.from('shoal cluster key wrap v1'), 32));
}

function gcmSeal(key: Buffer, plaintext: Buffer, aad: Buffer): { iv: string; ciphertext: string; tag: string } {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { iv: iv.toString('base64'), ciphertext: ciphertext.toString('base64'), tag: cipher.getAuthTag().toString('base64') };
}

function gcmOpen(key: Buffer, box: { iv: string; ciphertext: string; tag: string }, aad: Buffer): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(box.iv, 'base64'));
  decipher.setAAD(aad);
  decipher.setAuthTag(Buffer.from(box.tag, 'base64'));
  return Buffer.concat([decipher.update(Buffer.from(box.ciphertext, 'base64')), decipher.final()]);
}

/** Wraps a data key for the secret `name` by the cluster key `key` (its public half is enough). */
export function wrapDataKey(dataKey: Buffer, name: string, key: PublicClusterKey): WrappedKey {
  const recipient = Buffer.from(key.publicKey, 'base64');
  const eph = generateKeyPairSync('x25519');
  const ephemeral = rawPublicKey(eph.publicKey);
  const shared = diffieHellman({ privateKey: eph.privateKey, publicKey: publicKeyOf(recipient) });
  const box = gcmSeal(kek(shared, ephemeral, recipient), dataKey, wrapAad(key.id, name));
  return { alg: wrapAlgorithm, keyId: key.id, ephemeral: ephemeral.toString('base64'), iv: box.iv, wrapped: box.ciphertext, tag: box.tag };
}

/** The data key, unwrapped with the cluster key's private half; throws if it is not that key's or was changed. */
export function unwrapDataKey(w: WrappedKey, name: string, privateKey: KeyObject): Buffer {
  const ephemeral = Buffer.from(w.ephemeral, 'base64');
  const shared = diffieHellman({ privateKey, publicKey: publicKeyOf(ephemeral) });
  return gcmOpen(kek(shared, ephemeral, rawPublicKey(privateKey)), { iv: w.iv, ciphertext: w.wrapped, tag: w.tag }, wrapAad(w.keyId, name));
}

/** Encrypts a secret's value with a new data key, wrapped by the cluster key `key`. */
export function sealSecretValue(name: string, value: Uint8Array, key: PublicClusterKey): SealedValue {
  const dataKey = randomBytes(32);
  try {
    const box = gcmSeal(dataKey, Buffer.from(value), valueAad(name));
    return { alg: valueAlgorithm, ...box, key: wrapDataKey(dataKey, name, key) };
  } finally {
    dataKey.fill(0);
  }
}

/** The value, decrypted with its data key (unwrapped here, or handed over by a voter); throws if it does not open. */
export function openSecretValue(name: string, sealed: SealedValue, dataKey: Buffer): Buffer {
  return gcmOpen(dataKey, sealed, valueAad(name));
}

/** The same value with its data key wrapped by `to` instead: the ciphertext does not change. */
export function rewrapSecretValue(name: string, sealed: SealedValue, from: KeyObject, to: PublicClusterKey): SealedValue {
  const dataKey = unwrapDataKey(sealed.key, name, from);
  try {
    return { ...sealed, key: wrapDataKey(dataKey, name, to) };
  } finally {
    dataKey.fill(0);
  }
}
