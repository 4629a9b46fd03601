// A new CA for a rotation: a new key and a self-signed certificate with the old CA's subject,
// and the new key certified by the old CA (a "NewWithOld" key-rollover certificate, RFC 4210
// 4.4). Keeping the subject makes the rollover certificate self-issued, so it does not count
// against the old CA's path length of 0 (RFC 5280 4.2.1.9): a peer or client that trusts only
// the old CA accepts a chain node certificate -> rollover certificate -> old CA, and one that
// trusts the new CA needs nothing more. Key ids tell the two CAs apart.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import {
  CA_VALID_DAYS_DEFAULT, SIGNING_ALGORITHM, exportKeyPem, generateKeys, importKeyPem, randomSerial, validity, type PemPair,
} from './certificates.ts';

export interface RolloverCa {
  /** The new CA: certificate and key. */
  ca: PemPair;
  /** The new CA's key, certified by the old CA. */
  crossPem: string;
}

export async function createRolloverCa(old: PemPair, now = new Date()): Promise<RolloverCa> {
  const oldCert = new x509.X509Certificate(old.certPem);
  const keys = await generateKeys();
  const { notBefore, notAfter } = validity({ now }, CA_VALID_DAYS_DEFAULT);
  const caExtensions = async (): Promise<x509.Extension[]> => [
    new x509.BasicConstraintsExtension(true, 0, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
  ];
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(), name: oldCert.subject, notBefore, notAfter, keys, signingAlgorithm: SIGNING_ALGORITHM,
    extensions: await caExtensions(),
  });
  const cross = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(), subject: oldCert.subject, issuer: oldCert.subject, notBefore,
    // The old CA cannot vouch past its own end.
    notAfter: notAfter < oldCert.notAfter ? notAfter : oldCert.notAfter,
    publicKey: keys.publicKey, signingKey: await importKeyPem(old.keyPem), signingAlgorithm: SIGNING_ALGORITHM,
    extensions: [...await caExtensions(), await x509.AuthorityKeyIdentifierExtension.create(oldCert)],
  });
  return { ca: { certPem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey) }, crossPem: cross.toString('pem') };
}
