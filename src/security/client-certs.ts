// Client certificates: how a person or a program proves who it is to the client API. The
// subject says it all, `CN=<principal>, OU=<role>, O=shoal`, signed by the cluster CA; a node
// certificate (CN=<node id>, no OU) is told apart by having no OU. The key is generated here
// (shoal dev, shoal init) or stays with the caller, who sends a certificate request (CSR) that
// csr.ts verifies. Signed by certificates.ts's signLeaf, as node certificates are.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';
import { isValidPrincipal, principalRule } from './principal.ts';
import { clientRoles, type ClientRole } from './roles.ts';
import { exportKeyPem, generateKeys, signLeaf, type CaOptions, type PemPair } from './certificates.ts';

export const CLIENT_CERT_VALID_DAYS_DEFAULT = 365;

export interface ClientCertOptions extends CaOptions {
  principal: string;
  role: ClientRole;
  /** The caller's own key, from a request verifyCsr (csr.ts) checked; absent, a key is generated and returned. */
  publicKey?: webcrypto.CryptoKey;
}

/**
 * A client certificate; `keyPem` is empty when it was made for the caller's own key (the key
 * stays with the caller), and `serial` is the certificate's, lowercase hex.
 */
export async function issueClientCert(ca: PemPair, options: ClientCertOptions): Promise<PemPair & { serial: string }> {
  if (!isValidPrincipal(options.principal)) throw new TypeError(`invalid principal ${JSON.stringify(options.principal)}: ${principalRule}`);
  if (!clientRoles.includes(options.role)) throw new TypeError(`invalid role ${JSON.stringify(options.role)}`);
  let publicKey = options.publicKey;
  let keyPem = '';
  if (publicKey === undefined) {
    const keys = await generateKeys();
    publicKey = keys.publicKey;
    keyPem = await exportKeyPem(keys.privateKey);
  }
  // clientAuth only: a client certificate cannot serve the API as if it were a node.
  const signed = await signLeaf(ca, publicKey, `CN=${options.principal}, OU=${options.role}, O=shoal`, options, CLIENT_CERT_VALID_DAYS_DEFAULT, [
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
  ]);
  return { certPem: signed.certPem, keyPem, serial: signed.serial };
}
