// Client certificates: how a person or a program proves who it is to the client API. The
// subject says it all, `CN=<principal>, OU=<role>, O=shoal`, signed by the cluster CA; a node
// certificate (CN=<node id>, no OU) is told apart by having no OU. The key is generated here
// (shoal dev, shoal init) or stays with the caller, who sends a certificate request (CSR).

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';
import { isValidPrincipal, principalRule } from './principal.ts';
import { clientRoles, type ClientRole } from './roles.ts';
import { exportKeyPem, generateKeys, importKeyPem, randomSerial, SIGNING_ALGORITHM, validity, type CaOptions, type PemPair } from './certificates.ts';

export const CLIENT_CERT_VALID_DAYS_DEFAULT = 365;

export interface ClientCertOptions extends CaOptions {
  principal: string;
  role: ClientRole;
  /** A PKCS#10 request (PEM) for the caller's own key; absent, a key is generated and returned. */
  csrPem?: string;
}

/** A client certificate; `keyPem` is empty when the request came with a CSR (the key stayed with the caller). */
export async function issueClientCert(ca: PemPair, options: ClientCertOptions): Promise<PemPair> {
  if (!isValidPrincipal(options.principal)) throw new TypeError(`invalid principal ${JSON.stringify(options.principal)}: ${principalRule}`);
  if (!clientRoles.includes(options.role)) throw new TypeError(`invalid role ${JSON.stringify(options.role)}`);
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await importKeyPem(ca.keyPem);
  let publicKey: webcrypto.CryptoKey;
  let keyPem = '';
  if (options.csrPem !== undefined) {
    const csr = new x509.Pkcs10CertificateRequest(options.csrPem);
    // The request must be signed by the key it carries: proof that the caller holds that key.
    if (!(await csr.verify())) throw new TypeError('the certificate request is not signed by its own key');
    publicKey = await csr.publicKey.export();
  } else {
    const keys = await generateKeys();
    publicKey = keys.publicKey;
    keyPem = await exportKeyPem(keys.privateKey);
  }
  const { notBefore, notAfter } = validity(options, CLIENT_CERT_VALID_DAYS_DEFAULT);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: `CN=${options.principal}, OU=${options.role}, O=shoal`,
    issuer: caCert.subject,
    notBefore,
    notAfter: notAfter < caCert.notAfter ? notAfter : caCert.notAfter,
    publicKey,
    signingKey: caKey,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      // clientAuth only: a client certificate cannot serve the API as if it were a node.
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem };
}
