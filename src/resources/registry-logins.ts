// Registry logins (`shoal registry login HOST`): the credentials an agent sends to a private
// registry when it pulls an image for a task. docs/docker.md, "Private registries".
//
// A login is two documents written in one transaction: the record here (`shoal.registries/<id>`:
// the host, the user name, times), which the API answers, and the password, a secret of its own
// in `shoal.secrets` (`registry-<id>`), so it is encrypted at rest, re-wrapped by a key rotation
// and handed to an agent exactly as a workload secret is: only the node that runs a task whose
// image is on that registry (or whose spec names that login) gets its data key, for that task.
// The password is never answered, logged, or written to an audit record (those name documents only).

import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { DocumentStore } from '../../fsm/index.ts';
import { registriesCollection } from './collections.ts';
import type { ServiceSpec } from './spec/service-spec.ts';

/** Docker Hub's names: an image without a registry host is pulled from it, and its login is kept under `docker.io`. */
export const dockerHubHost = 'docker.io';
const hubAliases = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);

/** A registry host as `docker login` takes it: a DNS name or an IP address, with an optional port. */
export const registryHostPattern = /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?$/;

/** The longest user name and password a login takes (registries' tokens are well under this). */
export const registryUsernameBytesMax = 256;
export const registryPasswordBytesMax = 8 * 1024;

export interface RegistryLogin {
  /** The host as given, lower-cased, Docker Hub's aliases as `docker.io`. */
  host: string;
  username: string;
  /** The secret that holds the password (registrySecretName(host)). */
  secret: string;
  createdAt: number;
  updatedAt: number;
}

export const registryLoginSchema = z.object({
  host: z.string().regex(registryHostPattern),
  username: z.string().min(1).max(registryUsernameBytesMax),
  secret: z.string().regex(/^registry-[0-9a-f]{16}$/),
  createdAt: z.number().int().min(0),
  updatedAt: z.number().int().min(0),
}).strict();

/** The host in its one spelling: lower case, Docker Hub's aliases folded into `docker.io`. */
export function canonicalRegistryHost(host: string): string {
  const h = host.toLowerCase();
  return hubAliases.has(h) ? dockerHubHost : h;
}

/** The id of a host's login record, and the suffix of its password's secret: 16 hex digits of its SHA-256. */
export function registryLoginId(host: string): string {
  return createHash('sha256').update(canonicalRegistryHost(host)).digest('hex').slice(0, 16);
}

export function registrySecretName(host: string): string {
  return `registry-${registryLoginId(host)}`;
}

/** Whether a secret's name is the form logins use: such secrets are written only by `registry login`. */
export function isRegistrySecretName(name: string): boolean {
  return /^registry-[0-9a-f]{16}$/.test(name);
}

/**
 * The registry an image reference is pulled from, as Docker reads it: the first path component
 * when it has a `.` or a `:` or is `localhost` (and more follows), otherwise Docker Hub.
 */
export function imageRegistryHost(image: string): string {
  const at = image.indexOf('@');
  const name = at >= 0 ? image.slice(0, at) : image;
  const slash = name.indexOf('/');
  if (slash < 0) return dockerHubHost;
  const first = name.slice(0, slash);
  if (first.includes('.') || first.includes(':') || first === 'localhost') return canonicalRegistryHost(first);
  return dockerHubHost;
}

/** The login a task of `spec` pulls with: the one its spec names (`registryLogin`), else its image's registry's; undefined when there is none. */
export function registryHostFor(spec: Pick<ServiceSpec, 'image'> & { registryLogin?: string | null }): string {
  return spec.registryLogin !== undefined && spec.registryLogin !== null ? canonicalRegistryHost(spec.registryLogin) : imageRegistryHost(spec.image);
}

/** The login record for `host` in `store` (a node's applied store); undefined when there is none or it does not parse. */
export function registryLoginInStore(store: Pick<DocumentStore, 'get'>, host: string): RegistryLogin | undefined {
  const d = store.get(registriesCollection, registryLoginId(host));
  const r = d === undefined ? undefined : registryLoginSchema.safeParse(d.doc);
  return r?.success === true && r.data.host === canonicalRegistryHost(host) ? r.data : undefined;
}
