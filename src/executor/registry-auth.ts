// The credentials a task's pull sends (docs/docker.md, "Private registries"): the registry login
// of the image's registry, if there is one, its password read as a secret is (secret-delivery.ts:
// from the node's applied store, decrypted with a data key handed to this node for this task).
// No login: the pull goes without credentials, as `docker pull` of a public image does. The
// password lives only in the pull's request (Docker's X-Registry-Auth header) and is never logged.

import type { RegistryAuth } from './runtime.ts';
import type { SecretDelivery } from './secret-delivery.ts';

/** A registry login as the agent needs it: the user name and the secret that holds the password. */
export interface RegistryLoginRef {
  host: string;
  username: string;
  secret: string;
}

export interface RegistryLogins {
  /** The login for `host` in this node's applied store, if any. */
  login(host: string): RegistryLoginRef | undefined;
}

export type PullAuth = { ok: true; auth: RegistryAuth | undefined } | { ok: false; wait: boolean; message: string };

/** The credentials for pulling with the login of registry `host` for task `taskId`, or why the task cannot pull yet (wait) or at all. */
export async function pullAuthFor(logins: RegistryLogins | undefined, d: SecretDelivery | undefined, host: string, taskId: string): Promise<PullAuth> {
  const login = logins?.login(host);
  if (login === undefined) return { ok: true, auth: undefined };
  if (d === undefined) return { ok: false, wait: false, message: `image_pull_failed: unauthorized: this node's agent reads no secrets (it runs without a data directory), so it cannot use the login for ${host}` };
  const r = await d.read(login.secret, taskId);
  if (!r.ok) {
    // A password that is not in the store (a snapshot restored with --discard-secrets) needs a new login, not a secret.
    const why = r.wait ? r.message : `it is not in the store; log in again: shoal registry login ${host} --username ${login.username} --password-stdin`;
    const message = `the password of the login for ${host} cannot be read: ${why}`;
    return r.wait ? { ok: false, wait: true, message: `waiting for registry credentials: ${message}` } : { ok: false, wait: false, message: `image_pull_failed: unauthorized: ${message}` };
  }
  const password = Buffer.from(r.bytes).toString('utf8');
  r.bytes.fill(0);
  return { ok: true, auth: { serveraddress: host, username: login.username, password } };
}
