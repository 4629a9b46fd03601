// What a node knows of the cluster CA: its certificate (every node) and, on voters that hold
// it, its private key. The key is read from disk when needed rather than kept from the start,
// because a voter may receive it after it started (docs/security.md, "Where the CA key lives").

import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { PemPair } from './certificates.ts';
import { readKeyFile } from './key-vault.ts';

export interface CaAuthority {
  readonly caPem: string;
  /** SHA-256 of the CA certificate's DER, lowercase hex: what join tokens pin. */
  readonly fingerprint: string;
  /** The CA certificate and key, when this node holds the key; undefined otherwise. */
  signer(): Signer | undefined;
}

/** A CA that signs, and the certificates to send after what it signs (a CA rotation's rollover certificate). */
export type Signer = PemPair & { chainPem?: string };

export const caKeyFile = (dataDir: string): string => path.join(dataDir, 'tls', 'ca.key');
export const caCertFile = (dataDir: string): string => path.join(dataDir, 'tls', 'ca.crt');

/** As certificates.ts caFingerprint, without loading the X.509 library (nodes compute it at start). */
export function fingerprintOf(certPem: string): string {
  return createHash('sha256').update(new X509Certificate(certPem).raw).digest('hex');
}

/** The CA as a data directory holds it (src/node/identity.ts lays the files out). */
export function fileCaAuthority(dataDir: string): CaAuthority {
  const caPem = readFileSync(caCertFile(dataDir), 'utf8');
  return {
    caPem,
    fingerprint: fingerprintOf(caPem),
    signer: () => {
      // Sealed under autolock: none until the node is unlocked (key-vault.ts).
      const keyPem = readKeyFile(caKeyFile(dataDir));
      return keyPem !== undefined ? { certPem: caPem, keyPem } : undefined;
    },
  };
}

/** A CA held in memory (tests, and nodes built without a data directory). */
export function memoryCaAuthority(ca: PemPair, holdsKey = true): CaAuthority {
  return { caPem: ca.certPem, fingerprint: fingerprintOf(ca.certPem), signer: () => (holdsKey ? ca : undefined) };
}
