// Digest pinning at apply (docs/docker.md, "Pinned digests"): the node that takes the apply asks
// its Docker once what each service's tag names now (GET /distribution/{name}/json, with the
// registry login when there is one) and writes the image into the spec as `name:tag@sha256:...`,
// as Docker Swarm does, so every task of a spec version runs the same build, and each node pulls
// its own platform's image of a multi-platform index. `?resolveImage=`:
//
//   always   resolve every tag (a tag moved to a new image is a new spec: a rolling update)
//   changed  resolve only a service whose image (tag) differs from its current spec's; an
//            unchanged one keeps the digest it was pinned to (the default)
//   never    keep the tags as written
//
// A registry that does not answer, or refuses, leaves the tag as it is with a warning in the
// answer: the apply is not failed for it. An image that is on the node without having come from
// a registry (imported or built) is left alone, silently: no registry knows it.
//
// Every path that writes an image pins it here, with the same modes: /v1/apply (services and
// jobs; `shoal service update --image` applies through it) and /v1/stacks/NAME/deploy.

import { ShoalError } from '../errors.ts';
import type { ImagePlatform, RegistryAuth } from '../executor/runtime.ts';
import { registryHostFor, registryLoginInStore } from '../resources/registry-logins.ts';
import { openSecretValue, unwrapDataKey } from '../resources/secret-crypto.ts';
import { isSealed, plainSecretBytes, secretInStore } from '../resources/secrets.ts';
import type { ServiceSpec } from '../resources/spec/index.ts';
import type { JobSpec } from '../resources/spec/job-spec.ts';
import type { ControlState } from '../resources/state.ts';
import type { Change } from '../resources/changes.ts';
import { servicesCollection } from '../resources/collections.ts';
import { jobsCollection, type JobRecord } from '../resources/jobs.ts';
import type { ImagePlatforms, ServiceRecord } from '../resources/records.ts';
import type { JsonObject } from '../../fsm/types.ts';
import type { ApiContext } from './context.ts';

export type ResolveMode = 'always' | 'changed' | 'never';
export const resolveModeDefault: ResolveMode = 'changed';

/** How long one registry lookup may take before the tag is kept. */
export const resolveTimeoutMs = 8_000;

/** What apply did with one service's image (`service`), or one job's (`job`). */
export type ImageResolution = ImageOutcome & ({ service: string } | { job: string });

interface ImageOutcome {
  /** The image as written in the document. */
  requested: string;
  /** The image written into the spec. */
  image: string;
  /** `resolved`: pinned now; `kept`: the current spec's pin (changed mode, same tag); `unpinned`: the tag kept (never, local, or a warning). */
  outcome: 'resolved' | 'kept' | 'unpinned';
  digest: string | null;
  /** The platforms the image offers, when resolved now. */
  platforms: ImagePlatform[];
}

export function withoutDigest(image: string): string {
  const at = image.indexOf('@');
  return at < 0 ? image : image.slice(0, at);
}

/** The login's credentials for `host`, opened here (a voter holds the cluster key), or a note why not. */
function loginAuth(ctx: ApiContext, host: string): { auth: RegistryAuth | undefined; note?: string } {
  const login = registryLoginInStore(ctx.store, host);
  if (login === undefined) return { auth: undefined };
  const record = secretInStore(ctx.store, login.secret);
  if (record === undefined) return { auth: undefined, note: `the login for ${host} has no password in the store` };
  if (!isSealed(record)) return { auth: { serveraddress: host, username: login.username, password: plainSecretBytes(record).toString('utf8') } };
  const key = ctx.clusterKeys?.locked === false ? ctx.clusterKeys.privateKey(record.sealed.key.keyId) : undefined;
  if (key === undefined) return { auth: undefined, note: `node ${ctx.node.id} cannot decrypt the login for ${host} (it holds no cluster key, or is locked); apply through a voter` };
  const dataKey = unwrapDataKey(record.sealed.key, record.name, key);
  try {
    const bytes = openSecretValue(record.name, record.sealed, dataKey);
    const password = bytes.toString('utf8');
    bytes.fill(0);
    return { auth: { serveraddress: host, username: login.username, password } };
  } finally {
    dataKey.fill(0);
  }
}

/**
 * The specs with their images pinned as `mode` says, what was done for each, and the warnings
 * (a tag kept because no registry answered). Reads the current state for `changed`.
 */
export async function resolveImages(ctx: ApiContext, specs: readonly ServiceSpec[], state: ControlState, mode: ResolveMode): Promise<{ specs: ServiceSpec[]; images: ImageResolution[]; warnings: string[] }> {
  const r = await resolveAll(ctx, specs, 'service', (name) => state.services.get(name)?.value.spec.image, mode);
  return { specs: r.items, images: r.images, warnings: r.warnings };
}

/** As resolveImages, for jobs' specs: `changed` compares with the job's current spec. */
export async function resolveJobImages(ctx: ApiContext, specs: readonly JobSpec[], state: ControlState, mode: ResolveMode): Promise<{ specs: JobSpec[]; images: ImageResolution[]; warnings: string[] }> {
  const r = await resolveAll(ctx, specs, 'job', (name) => state.jobs?.get(name)?.value.spec.image, mode);
  return { specs: r.items, images: r.images, warnings: r.warnings };
}

type Kind = 'service' | 'job';

async function resolveAll<T extends { name: string; image: string }>(
  ctx: ApiContext, specs: readonly T[], kind: Kind, current: (name: string) => string | undefined, mode: ResolveMode,
): Promise<{ items: T[]; images: ImageResolution[]; warnings: string[] }> {
  const items: T[] = [];
  const images: ImageResolution[] = [];
  const warnings: string[] = [];
  for (const spec of specs) {
    const r = await resolveOne(ctx, spec, kind, current(spec.name), mode, warnings);
    images.push(kind === 'service' ? { service: spec.name, ...r } : { job: spec.name, ...r });
    items.push(r.image === spec.image ? spec : { ...spec, image: r.image });
  }
  return { items, images, warnings };
}

async function resolveOne(ctx: ApiContext, spec: { name: string; image: string; registryLogin?: string | null }, kind: Kind, cur: string | undefined, mode: ResolveMode, warnings: string[]): Promise<ImageOutcome> {
  const base = { requested: spec.image };
  const unpinned: ImageOutcome = { ...base, image: spec.image, outcome: 'unpinned', digest: null, platforms: [] };
  if (mode === 'never') return unpinned;
  // An image written with its digest is pinned by its author.
  if (spec.image.includes('@')) return { ...unpinned, outcome: 'kept', digest: spec.image.slice(spec.image.indexOf('@') + 1) };
  if (mode === 'changed' && cur !== undefined && cur.includes('@') && withoutDigest(cur) === spec.image) {
    return { ...base, image: cur, outcome: 'kept', digest: cur.slice(cur.indexOf('@') + 1), platforms: [] };
  }
  const runtime = ctx.runtime;
  if (runtime?.resolveImage === undefined) {
    warnings.push(`${kind} ${spec.name}: image ${spec.image} kept as a tag: node ${ctx.node.id} has no container runtime to ask its registry with (apply through a node that runs workloads to pin it)`);
    return unpinned;
  }
  const host = registryHostFor(spec);
  const login = loginAuth(ctx, host);
  try {
    const r = await runtime.resolveImage(spec.image, resolveTimeoutMs, login.auth);
    if (r === 'local') return unpinned;
    return { ...base, image: `${spec.image}@${r.digest}`, outcome: 'resolved', digest: r.digest, platforms: r.platforms };
  } catch (err) {
    if (err instanceof ShoalError) throw err;
    const why = err instanceof Error ? err.message : String(err);
    warnings.push(`${kind} ${spec.name}: image ${spec.image} kept as a tag, not pinned to a digest (${why}${login.note !== undefined ? `; ${login.note}` : ''}); its tasks may run different builds if the tag moves`);
    return unpinned;
  }
}

/**
 * A service record written by apply or a stack deploy, with what its images offer (issue 40:
 * placement checks a node's platform against them): the platforms of the image pinned now, and
 * those kept from the current record for an image it still names (spec or previousSpec).
 */
export function withImagePlatforms(c: Change, state: ControlState, images: readonly ImageResolution[]): Change {
  if (c.kind === 'put' && c.collection === jobsCollection) return withJobImagePlatforms(c, state, images);
  if (c.kind !== 'put' || c.collection !== servicesCollection) return c;
  const doc = c.doc as unknown as ServiceRecord;
  const kept = state.services.get(doc.name)?.value.imagePlatforms ?? [];
  const list: ImagePlatforms[] = [];
  for (const image of new Set([doc.spec.image, ...(doc.previousSpec !== null ? [doc.previousSpec.image] : [])])) {
    const now = images.find((i) => 'service' in i && i.service === doc.name && i.image === image && i.outcome === 'resolved' && i.platforms.length > 0);
    const entry = now !== undefined ? { image, platforms: now.platforms } : kept.find((k) => k.image === image);
    if (entry !== undefined) list.push(entry);
  }
  const { imagePlatforms: _old, ...rest } = doc;
  const next: ServiceRecord = list.length > 0 ? { ...rest, imagePlatforms: list } : rest;
  return { ...c, doc: next as unknown as JsonObject };
}

/**
 * A job record written by apply or a stack deploy, with what its image offers: its runs are
 * placed as a service's tasks are (a job's runs all run its current spec, so only that image's).
 */
function withJobImagePlatforms(c: Extract<Change, { kind: 'put' }>, state: ControlState, images: readonly ImageResolution[]): Change {
  const doc = c.doc as unknown as JobRecord;
  const image = doc.spec.image;
  const now = images.find((i) => 'job' in i && i.job === doc.name && i.image === image && i.outcome === 'resolved' && i.platforms.length > 0);
  const entry = now !== undefined ? { image, platforms: now.platforms } : state.jobs?.get(doc.name)?.value.imagePlatforms?.find((k) => k.image === image);
  const { imagePlatforms: _old, ...rest } = doc;
  const next: JobRecord = entry !== undefined ? { ...rest, imagePlatforms: [entry] } : rest;
  return { ...c, doc: next as unknown as JsonObject };
}
