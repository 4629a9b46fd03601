// The CA as a node holds it while the CA may rotate: the trust bundle is the node's `tls.caPem`
// (kept by ca-rotation-agent.ts), join tokens pin the bundle's first CA, and the signer is the
// new CA from the reissue phase on (with the rollover certificate in every chain it signs during
// reissue, so a peer that trusts only the old CA accepts it), the bundle's first CA otherwise.

import path from 'node:path';
import type { DocumentStore } from '../../fsm/index.ts';
import type { Tls } from '../base/tls-material.ts';
import { caKeyFile, type CaAuthority, type Signer } from './authority.ts';
import { bundleFingerprints, certFingerprint, splitPem, withChainOf } from './ca-bundle.ts';
import { keyMatchesCert } from './ca-key-fetcher.ts';
import { readKeyFile } from './key-vault.ts';
import { caRotationCollection, caRotationDocId, caRotationSchema, type CaRotation } from './ca-rotation.ts';

/** Where a voter keeps the new CA's key between the add and retire phases. */
export const caNextKeyFile = (dataDir: string): string => path.join(dataDir, 'tls', 'ca-next.key');

export type { Signer };

/** The rotation record in the store, if any (one that does not parse was not written by shoal: none). */
export function readRotation(store: DocumentStore): { rotation: CaRotation; rev: number } | undefined {
  const d = store.get(caRotationCollection, caRotationDocId);
  if (d === undefined) return undefined;
  const parsed = caRotationSchema.safeParse(d.doc);
  return parsed.success ? { rotation: parsed.data, rev: d.rev } : undefined;
}

/**
 * The rotation record if it is about a CA this node trusts (`bundlePem`): a store restored into a
 * new cluster (shoal snapshot restore makes a new CA) keeps the old cluster's record, which
 * names CAs this cluster never had and must not follow.
 */
export function readOwnRotation(store: DocumentStore, bundlePem: string): { rotation: CaRotation; rev: number } | undefined {
  const found = readRotation(store);
  if (found === undefined) return undefined;
  const trusted = bundleFingerprints(bundlePem);
  const r = found.rotation;
  return trusted.includes(certFingerprint(r.oldCaPem)) || trusted.includes(certFingerprint(r.newCaPem)) ? found : undefined;
}

function readKey(file: string, certPem: string): string | undefined {
  try {
    // In the clear, or sealed under autolock and the node unlocked (key-vault.ts).
    const keyPem = readKeyFile(file);
    return keyPem !== undefined && keyMatchesCert(keyPem, certPem) ? keyPem : undefined;
  } catch {
    return undefined;
  }
}

/** This node's key for `caPem`, in ca-next.key or ca.key; undefined when it holds none. */
export function heldKeyFor(dataDir: string, caPem: string): string | undefined {
  return readKey(caNextKeyFile(dataDir), caPem) ?? readKey(caKeyFile(dataDir), caPem);
}

/** What certificate text to hand out for `leafPem` signed by `signer`. */
export function withChain(leafPem: string, signer: Signer): string {
  return withChainOf(leafPem, signer.chainPem);
}

export function rotatingCaAuthority(dataDir: string, tls: Tls, store: DocumentStore): CaAuthority {
  let cached = { bundle: '', fingerprint: '' };
  const primary = (): string => splitPem(tls.caPem)[0] ?? tls.caPem;
  return {
    get caPem() { return tls.caPem; },
    get fingerprint() {
      if (cached.bundle !== tls.caPem) cached = { bundle: tls.caPem, fingerprint: certFingerprint(primary()) };
      return cached.fingerprint;
    },
    signer: () => {
      const r = readOwnRotation(store, tls.caPem)?.rotation;
      if (r !== undefined && (r.phase === 'reissue' || r.phase === 'retire')) {
        const keyPem = heldKeyFor(dataDir, r.newCaPem);
        // A voter that has no new key yet signs nothing: a certificate of the old CA now would
        // only have to be renewed again.
        if (keyPem === undefined) return undefined;
        return { certPem: r.newCaPem, keyPem, ...(r.phase === 'reissue' ? { chainPem: r.crossPem } : {}) };
      }
      const keyPem = readKey(caKeyFile(dataDir), primary());
      return keyPem === undefined ? undefined : { certPem: primary(), keyPem };
    },
  };
}
