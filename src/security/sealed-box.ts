// Sealing a secret to a certificate: ECDH between a fresh ephemeral P-256 key and the public key
// in the recipient's certificate, HKDF-SHA256 to an AES-256-GCM key. Only the holder of the
// certificate's private key can open it, whatever carries it; the CA key reaches a new voter
// this way (docs/security.md, "Where the CA key lives").

import {
  createCipheriv, createDecipheriv, createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync, hkdfSync, randomBytes, X509Certificate,
} from 'node:crypto';
import { z } from 'zod';

export const sealedBoxSchema = z.object({
  /** The ephemeral public key, SPKI PEM. */
  ephemeralKey: z.string().max(1024),
  iv: z.string().max(64),
  ciphertext: z.string().max(64 * 1024),
  tag: z.string().max(64),
}).strict();
export type SealedBox = z.infer<typeof sealedBoxSchema>;

const info = Buffer.from('shoal sealed box v1');

function aesKey(shared: Buffer, ephemeralSpki: string): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.from(ephemeralSpki), info, 32));
}

export function sealForCert(certPem: string, plaintext: string): SealedBox {
  const recipient = new X509Certificate(certPem).publicKey;
  const eph = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const ephemeralKey = eph.publicKey.export({ format: 'pem', type: 'spki' }).toString();
  const key = aesKey(diffieHellman({ privateKey: eph.privateKey, publicKey: recipient }), ephemeralKey);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return { ephemeralKey, iv: iv.toString('base64'), ciphertext: ciphertext.toString('base64'), tag: cipher.getAuthTag().toString('base64') };
}

/** Opens a box with the recipient's private key (PKCS#8 PEM); throws if it was not sealed to it or was changed. */
export function openWithKey(keyPem: string, box: SealedBox): string {
  const shared = diffieHellman({ privateKey: createPrivateKey(keyPem), publicKey: createPublicKey(box.ephemeralKey) });
  const decipher = createDecipheriv('aes-256-gcm', aesKey(shared, box.ephemeralKey), Buffer.from(box.iv, 'base64'));
  decipher.setAuthTag(Buffer.from(box.tag, 'base64'));
  return Buffer.concat([decipher.update(Buffer.from(box.ciphertext, 'base64')), decipher.final()]).toString('utf8');
}
