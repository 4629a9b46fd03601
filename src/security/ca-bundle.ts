// The trust bundle: the CA certificates a node (and the CLI) accepts a peer's chain from, as one
// PEM text (TLS takes several roots in one `ca` string). Outside a CA rotation it holds one
// certificate; during one, the old and the new CA, the first being the one join tokens pin
// (docs/security.md, "Rotating the CA").

import { createHash, X509Certificate } from 'node:crypto';

const pemBlock = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The certificates of a PEM text, each as its own PEM block (no trailing newline). */
export function splitPem(bundlePem: string): string[] {
  return bundlePem.match(pemBlock) ?? [];
}

/** Several PEM certificates as one text, each ending with a newline (OpenSSL refuses a block glued to the next). */
export function joinPem(pems: ReadonlyArray<string>): string {
  return pems.map((p) => `${p.trim()}\n`).join('');
}

/** SHA-256 of a certificate's DER, lowercase hex (the first certificate of a PEM text). */
export function certFingerprint(certPem: string): string {
  return createHash('sha256').update(new X509Certificate(certPem).raw).digest('hex');
}

/** The fingerprints of a bundle's certificates, in order. */
export function bundleFingerprints(bundlePem: string): string[] {
  return splitPem(bundlePem).map(certFingerprint);
}

/** The leaf of a chain: its first certificate. */
export function leafOf(chainPem: string): string {
  const first = splitPem(chainPem)[0];
  if (first === undefined) throw new TypeError('no certificate in the PEM text');
  return first;
}

/**
 * The CA of `bundlePem` that issued `certPem` (its first certificate): names and key ids match
 * and the signature verifies. Undefined when none did. Expiry is not looked at (renewal of an
 * expired certificate relies on that).
 */
export function issuerIn(certPem: string, bundlePem: string): string | undefined {
  const cert = new X509Certificate(leafOf(certPem));
  return splitPem(bundlePem).find((caPem) => {
    const ca = new X509Certificate(caPem);
    return cert.checkIssued(ca) && cert.verify(ca.publicKey);
  });
}

/**
 * Whether a CA of `bundlePem` issued the certificate `certDer` (a peer's leaf, as TLS gave it):
 * what a connection opened before the bundle changed (a CA rotation's retire) is checked against.
 * The bundle's certificates are parsed once per bundle text.
 */
export function issuedByBundle(certDer: Buffer, bundlePem: string): boolean {
  if (parsedBundle.pem !== bundlePem) parsedBundle = { pem: bundlePem, cas: splitPem(bundlePem).map((p) => new X509Certificate(p)) };
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certDer);
  } catch {
    return false;
  }
  return parsedBundle.cas.some((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey));
}
let parsedBundle: { pem: string; cas: X509Certificate[] } = { pem: '', cas: [] };

/** A signed leaf followed by the chain its signer hands out with it (none outside a CA rotation). */
export function withChainOf(leafPem: string, chainPem: string | undefined): string {
  return chainPem === undefined ? leafPem : joinPem([leafPem, chainPem]);
}
