// The admin credential `shoal dev`, `shoal init` and `shoal snapshot restore` write for the
// local user: a client certificate made here with the CA key the data directory holds (the key
// never leaves it), added as a context (contexts.ts) and made current.

import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadIdentity } from '../node/identity.ts';
import type { AddedContext } from './contexts.ts';
import { saveUserContext, writeCredential, type CredentialFile } from './credential-file.ts';

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

/**
 * Issues an admin credential as writeAdminCredential does, writes it to `opts.files`, and adds it
 * as the local user's context `name` (or the --context name), made current. `devDataDir`: the
 * `shoal dev` directory it is for, whose next cluster replaces this context.
 */
export async function addAdminContext(caDataDir: string, addresses: string[], name: string, opts: { files?: string[]; devDataDir?: string } = {}): Promise<AddedContext & { credential: CredentialFile }> {
  const credential = await writeAdminCredential(caDataDir, addresses, opts.files ?? []);
  const kept = opts.devDataDir !== undefined ? { ...credential, devDataDir: path.resolve(opts.devDataDir) } : credential;
  return { ...saveUserContext(kept, name), credential };
}
