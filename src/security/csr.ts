// Certificate requests: a joining machine makes its key pair itself and sends only a PKCS#10
// request (the public key, signed by the private one), so the private key never leaves it. The
// CA side checks the request's own signature and that it names what the join says, then signs.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';
import { ShoalError } from '../errors.ts';
import {
  KEY_ALGORITHM, SIGNING_ALGORITHM, exportKeyPem, generateKeys, signNodeKey,
  type NodeCertOptions, type PemPair, type SignedCert,
} from './certificates.ts';

/** A request is a few hundred bytes; anything much larger is not one of ours. */
export const csrPemBytesMax = 8 * 1024;

export interface CsrAndKey {
  csrPem: string;
  /** PKCS#8 PEM; stays on the machine that made it. */
  keyPem: string;
}

/** Makes a fresh P-256 key and a request for a certificate whose CN is `commonName`. */
export async function createCsr(commonName: string): Promise<CsrAndKey> {
  const keys = await generateKeys();
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: `CN=${commonName}, O=shoal`, keys, signingAlgorithm: SIGNING_ALGORITHM,
  });
  return { csrPem: csr.toString('pem'), keyPem: await exportKeyPem(keys.privateKey) };
}

/** What a request says, once its signature is checked: the CN it asks for and its public key. */
export interface VerifiedCsr {
  commonName: string;
  publicKey: webcrypto.CryptoKey;
}

/** Parses and verifies a request; a malformed, unsigned or foreign-algorithm one is bad_request. */
export async function verifyCsr(csrPem: string): Promise<VerifiedCsr> {
  const refuse = (why: string): never => {
    throw new ShoalError('bad_request', `the certificate request ${why}`, { problems: [{ path: 'body.csr', message: why }] });
  };
  if (csrPem.length > csrPemBytesMax) refuse(`is ${csrPem.length} bytes; at most ${csrPemBytesMax}`);
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(csrPem);
  } catch (err) {
    return refuse(`is not a PEM PKCS#10 request (${(err as Error).message})`);
  }
  if (!(await csr.verify())) refuse('is not signed by the key it carries');
  let publicKey: webcrypto.CryptoKey;
  try {
    publicKey = await csr.publicKey.export(KEY_ALGORITHM, ['verify']) as unknown as webcrypto.CryptoKey;
  } catch {
    return refuse('carries a key that is not ECDSA P-256');
  }
  const cns = csr.subjectName.getField('CN');
  if (cns.length !== 1 || cns[0] === undefined) return refuse('must name exactly one CN');
  return { commonName: cns[0], publicKey };
}

/** Signs a verified request as node `nodeId`'s certificate; the request must name that id. */
export async function signNodeCsr(ca: PemPair, csr: VerifiedCsr, nodeId: string, options: NodeCertOptions): Promise<SignedCert> {
  if (csr.commonName !== nodeId) {
    throw new ShoalError('bad_request', `the certificate request names ${csr.commonName}, not the node ${nodeId}`, { problems: [{ path: 'body.csr', message: 'CN must be the joining node\'s id' }] });
  }
  return signNodeKey(ca, nodeId, csr.publicKey, options);
}
