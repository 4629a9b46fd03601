// The admin credential `shoal dev` and `shoal init` write for the local user: a client
// certificate made here with the CA key the data directory holds (the key never leaves it).

import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadIdentity } from '../node/identity.ts';
import { writeCredential, type CredentialFile } from './credential-file.ts';

/** The principal of the local user's admin credential: the login name, made safe for a certificate. */
export function localPrincipal(): string {
  let user = 'admin';
  try {
    user = os.userInfo().username;
  } catch {
    // no user database entry (a container): keep 'admin'
  }
  const safe = user.replace(/[^A-Za-z0-9._@-]/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 58);
  return safe === '' || safe.startsWith('node') ? `user-${safe || 'admin'}` : safe;
}

/** Issues an admin client certificate with the CA key in `caDataDir` and writes it to every file in `files`. */
export async function writeAdminCredential(caDataDir: string, addresses: string[], files: string[]): Promise<CredentialFile> {
  const { issueClientCert } = await import('../security/client-certs.ts');
  const ca = { certPem: readFileSync(path.join(caDataDir, 'tls', 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(caDataDir, 'tls', 'ca.key'), 'utf8') };
  const principal = localPrincipal();
  const cert = await issueClientCert(ca, { principal, role: 'admin' });
  const credential: CredentialFile = {
    version: 1, clusterId: loadIdentity(caDataDir).clusterId, ca: ca.certPem, addresses, principal, role: 'admin', cert: cert.certPem, key: cert.keyPem,
  };
  for (const f of new Set(files)) writeCredential(f, credential);
  return credential;
}
