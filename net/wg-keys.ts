// WireGuard keys: Curve25519 (X25519) key pairs, as base64 of their 32 raw bytes (the form `wg`
// reads and prints). Generated with Node's own crypto, so no subprocess ever sees a private key,
// and stored in the node's data directory, readable by its owner only. The private key never
// leaves the node: only the public key is published (in the node's record).

import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ShoalError } from '../src/errors.ts';

/** 32 bytes in standard base64: 43 characters and one '='. */
export const wgKeyPattern = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

export interface WgKeyPair {
  privateKey: string;
  publicKey: string;
}

/** DER prefix of a PKCS#8 X25519 private key; the 32 raw bytes follow (RFC 8410). */
const pkcs8X25519Prefix = Buffer.from('302e020100300506032b656e04220420', 'hex');

export function isWgKey(s: string): boolean {
  return wgKeyPattern.test(s);
}

export function generateKeyPair(): WgKeyPair {
  const { privateKey } = generateKeyPairSync('x25519');
  const d = privateKey.export({ format: 'jwk' }).d;
  if (d === undefined) throw new ShoalError('internal', 'x25519 key without its private part');
  const priv = Buffer.from(d, 'base64url').toString('base64');
  return { privateKey: priv, publicKey: publicKeyOf(priv) };
}

/** The public key of a base64 private key (what `wg pubkey` prints). */
export function publicKeyOf(privateKey: string): string {
  if (!isWgKey(privateKey)) throw new ShoalError('bad_request', 'not a WireGuard key (32 bytes in base64)');
  const der = Buffer.concat([pkcs8X25519Prefix, Buffer.from(privateKey, 'base64')]);
  const x = createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })).export({ format: 'jwk' }).x;
  if (x === undefined) throw new ShoalError('internal', 'x25519 public key without its bytes');
  return Buffer.from(x, 'base64url').toString('base64');
}

/** The node's key file: DATA/mesh/private.key. */
export function keyFilePath(dataDir: string): string {
  return path.join(dataDir, 'mesh', 'private.key');
}

/** Reads the node's key pair, creating it (mode 0600) on first use. */
export function loadOrCreateKeyPair(dataDir: string): WgKeyPair {
  const file = keyFilePath(dataDir);
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text !== undefined) {
    const privateKey = text.trim();
    if (!isWgKey(privateKey)) throw new ShoalError('config_invalid', `${file} does not hold a WireGuard private key (32 bytes in base64); remove it to generate a new one (then the node's peers learn the new public key from its record)`);
    return { privateKey, publicKey: publicKeyOf(privateKey) };
  }
  return writeKeyPair(dataDir, generateKeyPair());
}

/** Replaces the node's key pair with a new one (`shoal node rotate-key`), atomically. */
export function writeKeyPair(dataDir: string, pair: WgKeyPair): WgKeyPair {
  const file = keyFilePath(dataDir);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, `${pair.privateKey}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
  return pair;
}
