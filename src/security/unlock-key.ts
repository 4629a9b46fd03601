// Autolock's unlock key and the recovery key, as text a person copies (docs/security.md,
// "Autolock", "The recovery key"). Both are 256 random bits. The unlock key seals the keys a
// voter keeps on disk (AES-256-GCM under HKDF-SHA256 of the key, a random salt per file); it is
// shown once and never written anywhere by shoal. The recovery key is the private half of an
// X25519 key pair whose public half is in the keyring: each cluster key is sealed to it there, so
// it restores the cluster keys from a snapshot on new machines.

import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { z } from 'zod';

export const unlockKeyPrefix = 'SHOAL-UNLOCK-1-';
export const recoveryKeyPrefix = 'SHOAL-RECOVERY-1-';

const b64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/).max(16 * 1024);
export const unlockSealSchema = z.object({ alg: z.literal('hkdf-sha256-aes-256-gcm'), salt: b64, iv: b64, ciphertext: b64, tag: b64 }).strict();
export type UnlockSeal = z.infer<typeof unlockSealSchema>;

function keyFrom(unlockKey: Buffer, salt: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', unlockKey, salt, Buffer.from('shoal autolock v1'), 32));
}

export function sealWithUnlockKey(unlockKey: Buffer, plaintext: Buffer, label: string): UnlockSeal {
  const salt = randomBytes(16);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyFrom(unlockKey, salt), iv);
  cipher.setAAD(Buffer.from(label));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { alg: 'hkdf-sha256-aes-256-gcm', salt: salt.toString('base64'), iv: iv.toString('base64'), ciphertext: ciphertext.toString('base64'), tag: cipher.getAuthTag().toString('base64') };
}

/** Throws when `unlockKey` is not the key `seal` was made with. */
export function openWithUnlockKey(unlockKey: Buffer, seal: UnlockSeal, label: string): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', keyFrom(unlockKey, Buffer.from(seal.salt, 'base64')), Buffer.from(seal.iv, 'base64'));
  decipher.setAAD(Buffer.from(label));
  decipher.setAuthTag(Buffer.from(seal.tag, 'base64'));
  try {
    return Buffer.concat([decipher.update(Buffer.from(seal.ciphertext, 'base64')), decipher.final()]);
  } catch {
    throw new Error('the unlock key does not open this node\'s keys (a key of another cluster, an older one, or mistyped)');
  }
}

/** `PREFIX<base64url of the 32 bytes>`. */
export function keyText(prefix: string, key: Buffer): string {
  return `${prefix}${key.toString('base64url')}`;
}

/** The 32 bytes of a key written as keyText; undefined when the text is not one (whitespace around it is allowed). */
export function parseKeyText(prefix: string, text: string): Buffer | undefined {
  const t = text.trim();
  if (!t.startsWith(prefix)) return undefined;
  const body = t.slice(prefix.length);
  if (!/^[A-Za-z0-9_-]{43}$/.test(body)) return undefined;
  const key = Buffer.from(body, 'base64url');
  return key.length === 32 ? key : undefined;
}

export function newUnlockKey(): Buffer {
  return randomBytes(32);
}
