// The cluster CA and node certificates: ECDSA P-256 keys from Node's webcrypto, certificates
// built with @peculiar/x509, keys exported as PKCS#8 PEM so `tls` takes them as they are.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createHash, webcrypto } from 'node:crypto';
import { isIP as isIpAddress } from 'node:net';
import type { NodeId } from '../raft/types.ts';
import { isValidId, nodeIdUri } from './identity.ts';
import { CA_VALID_DAYS_DEFAULT, NODE_CERT_VALID_DAYS_DEFAULT } from './cert-lifetimes.ts';


type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

// Node's webcrypto is a complete WebCrypto; its TypeScript type is merely declared apart from
// the DOM one @peculiar/x509 names.
x509.cryptoProvider.set(webcrypto as unknown as ReturnType<typeof x509.cryptoProvider.get>);

export const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
export const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY_MS = 24 * 60 * 60 * 1000;
/** Backdate notBefore so a peer whose clock runs a little behind still accepts a fresh cert. */
const CLOCK_SKEW_MS = 5 * 60 * 1000;

export { CA_VALID_DAYS_DEFAULT, NODE_CERT_VALID_DAYS_DEFAULT };

/** A certificate and its private key, both PEM (the key PKCS#8). */
export interface PemPair {
  certPem: string;
  keyPem: string;
}

export interface CaOptions {
  validDays?: number;
  /** The clock, for tests; defaults to now. */
  now?: Date;
}

export interface NodeCertOptions extends CaOptions {
  /** Addresses and names the node is reached at: IPs become IP SANs, the rest DNS SANs. */
  hosts: string[];
}

export async function createCa(clusterId: string, options: CaOptions = {}): Promise<PemPair> {
  if (!isValidId(clusterId)) throw new TypeError(`invalid cluster id ${JSON.stringify(clusterId)}`);
  const keys = await generateKeys();
  const { notBefore, notAfter } = validity(options, CA_VALID_DAYS_DEFAULT);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=shoal cluster CA ${clusterId}, O=shoal`,
    notBefore,
    notAfter,
    keys,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions: [
      // pathLength 0: the CA signs node certificates only, never another CA.
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey) };
}

export async function issueNodeCert(ca: PemPair, nodeId: NodeId, options: NodeCertOptions): Promise<PemPair> {
  const keys = await generateKeys();
  const { certPem } = await signNodeKey(ca, nodeId, keys.publicKey, options);
  return { certPem, keyPem: await exportKeyPem(keys.privateKey) };
}

/** A certificate the CA signed for a public key it never saw the private half of (a CSR's). */
export interface SignedCert {
  certPem: string;
  /** Lowercase hex, as the deny-list keeps it. */
  serial: string;
}

/** Signs a node certificate for `publicKey` (from a CSR, or a key made here): CN and URI SAN name the node. */
export async function signNodeKey(ca: PemPair, nodeId: NodeId, publicKey: CryptoKey, options: NodeCertOptions): Promise<SignedCert> {
  if (!isValidId(nodeId)) throw new TypeError(`invalid node id ${JSON.stringify(nodeId)}`);
  return signLeaf(ca, publicKey, `CN=${nodeId}, O=shoal`, options, NODE_CERT_VALID_DAYS_DEFAULT, [
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
    new x509.SubjectAlternativeNameExtension(subjectAltNames(nodeId, options.hosts)),
  ]);
}

/** Signs a leaf certificate (node or client) for `publicKey`: never a CA, never outliving it. */
export async function signLeaf(ca: PemPair, publicKey: CryptoKey, subject: string, options: CaOptions, defaultDays: number, extensions: x509.Extension[]): Promise<SignedCert> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await importKeyPem(ca.keyPem);
  const { notBefore, notAfter } = validity(options, defaultDays);
  const serial = randomSerial();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial,
    subject,
    issuer: caCert.subject,
    notBefore,
    // A leaf certificate never outlives the CA that vouches for it.
    notAfter: notAfter < caCert.notAfter ? notAfter : caCert.notAfter,
    publicKey,
    signingKey: caKey,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      ...extensions,
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  return { certPem: cert.toString('pem'), serial };
}

/** SHA-256 of the certificate's DER, lowercase hex: what a join token pins. */
export function caFingerprint(certPem: string): string {
  const der = Buffer.from(x509.PemConverter.decodeFirst(certPem));
  return createHash('sha256').update(der).digest('hex');
}

function subjectAltNames(nodeId: NodeId, hosts: string[]): x509.JsonGeneralName[] {
  const names: x509.JsonGeneralName[] = [{ type: 'url', value: nodeIdUri(nodeId) }];
  for (const host of new Set(hosts)) {
    names.push({ type: isIpAddress(host) === 0 ? 'dns' : 'ip', value: host });
  }
  return names;
}

export function validity(options: CaOptions, defaultDays: number): { notBefore: Date; notAfter: Date } {
  const validDays = options.validDays ?? defaultDays;
  if (!(validDays > 0)) throw new RangeError(`validDays must be positive, got ${validDays}`);
  const now = (options.now ?? new Date()).getTime();
  return { notBefore: new Date(now - CLOCK_SKEW_MS), notAfter: new Date(now + validDays * DAY_MS) };
}

/** 16 random bytes with the top bit cleared: a positive serial, as RFC 5280 requires. */
export function randomSerial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return Buffer.from(bytes).toString('hex');
}

export async function generateKeys(): Promise<CryptoKeyPair> {
  return webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify']);
}

export async function exportKeyPem(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

export async function importKeyPem(keyPem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decodeFirst(keyPem);
  return webcrypto.subtle.importKey('pkcs8', der, KEY_ALGORITHM, false, ['sign']);
}
