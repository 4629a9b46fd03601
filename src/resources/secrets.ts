// Workload secrets: a value (bytes) written through PUT /v1/secrets/{name}, kept in the replicated
// store (`shoal.secrets/<name>`) and delivered by the agents to the containers of the services
// that name it, as a file under /run/secrets/. The value goes one way: nothing the API reads back
// carries it (redactSecretValue is applied at every exit that can hand out a document of the
// collection), only its metadata (size, digest, version, times). docs/resources.md, "Secrets".

import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Compare, DocumentStore } from '../../fsm/index.ts';
import type { JsonObject } from '../../fsm/types.ts';
import { secretsCollection } from './collections.ts';
import type { Problem } from './spec/reader.ts';
import type { Assert, Same, ServiceSpec } from './spec/service-spec.ts';
import type { ControlState } from './state.ts';

/** The largest secret value, in bytes (as Nomad's variables; a key, a certificate, a password file fit). */
export const secretValueBytesMax = 64 * 1024;

/** A secret's name: a DNS label, the rule service names follow. */
export const secretNamePattern = /^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export interface SecretRecord {
  /** The document id. */
  name: string;
  /** The value's bytes, base64 (standard alphabet, padded). Never answered through the API. */
  value: string;
  /** `sha256:<hex>` of the value's bytes. */
  digest: string;
  /** The value's length in bytes. */
  size: number;
  /** 1 at creation, one more each time the value changes (a write of the same value changes nothing). */
  version: number;
  /** Log times of creation and of the last change of value. */
  createdAt: number;
  updatedAt: number;
}

/** What the API answers about a secret: everything but the value. */
export type SecretMeta = Omit<SecretRecord, 'value'>;

const nat = z.number().int().min(0);

export const secretRecordSchema = z.object({
  name: z.string().regex(secretNamePattern),
  value: z.string().max(Math.ceil(secretValueBytesMax / 3) * 4).regex(/^[A-Za-z0-9+/]*={0,2}$/),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  size: nat.max(secretValueBytesMax),
  version: z.number().int().min(1),
  createdAt: nat,
  updatedAt: nat,
}).strict();

export const secretMetaSchema = secretRecordSchema.omit({ value: true });

export type _SecretRecordMatchesSchema = Assert<Same<z.infer<typeof secretRecordSchema>, SecretRecord>>;

export function secretDigest(bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** The bytes of a record's value. */
export function secretBytes(r: SecretRecord): Buffer {
  return Buffer.from(r.value, 'base64');
}

export function secretMeta(r: SecretRecord): SecretMeta {
  return { name: r.name, digest: r.digest, size: r.size, version: r.version, createdAt: r.createdAt, updatedAt: r.updatedAt };
}

/**
 * The record after writing `bytes` to the secret `name` (`cur` is the record there now, if any),
 * or null when the value is the one it already holds: a write of the same value is no change.
 */
export function writeSecret(name: string, bytes: Uint8Array, now: number, cur: SecretRecord | undefined): SecretRecord | null {
  if (bytes.length > secretValueBytesMax) throw new Error(`assertion: a secret of ${bytes.length} bytes passed the size check`);
  const digest = secretDigest(bytes);
  if (cur !== undefined && cur.digest === digest && cur.size === bytes.length) return null;
  return {
    name, value: Buffer.from(bytes).toString('base64'), digest, size: bytes.length,
    version: cur === undefined ? 1 : cur.version + 1, createdAt: cur?.createdAt ?? now, updatedAt: now,
  };
}

/** The services whose spec (current, or previous: a rollback returns to it) names the secret, sorted. */
export function servicesUsingSecret(state: ControlState, name: string): string[] {
  const users: string[] = [];
  for (const s of state.services.values()) {
    const specs = [s.value.spec, s.value.previousSpec];
    if (specs.some((spec) => spec?.secrets.some((ref) => ref.name === name) === true)) users.push(s.value.name);
  }
  return users.sort();
}

/**
 * A document of `collection` as the API may hand it out: a secret's without its value, any
 * other as it is. Every read path that can answer a document of the store goes through this
 * (src/api/redact.ts): the value leaves a node only in snapshots and to its own agent.
 */
export function redactSecretValue(collection: string, doc: JsonObject): JsonObject {
  if (collection !== secretsCollection || !Object.hasOwn(doc, 'value')) return doc;
  const { value: _withheld, ...rest } = doc;
  return rest;
}

/**
 * Every reference of `specs` to a secret that does not exist, each at its path (`services[1].secrets[0].name`):
 * an apply that names one is refused whole, as any other bad field.
 */
export function missingSecretProblems(specs: readonly ServiceSpec[], exists: (name: string) => boolean): Problem[] {
  return specs.flatMap((spec, i) => spec.secrets.flatMap((ref, j): Problem[] => (exists(ref.name) ? [] : [{
    path: `services[${i}].secrets[${j}].name`, message: `no secret named "${ref.name}"; create it first: shoal secret create ${ref.name} --from-file FILE`,
  }])));
}

/** Compares that every secret `specs` name still exists when the apply's transaction applies (it is not removed meanwhile). */
export function secretExistsCompares(specs: readonly ServiceSpec[]): Compare[] {
  const names = [...new Set(specs.flatMap((s) => s.secrets.map((r) => r.name)))].sort();
  return names.map((id) => ({ collection: secretsCollection, id, target: 'exists', cmp: '=', value: true }));
}

/** The bytes of the secret `name` in `store` (a node's applied store); undefined when there is none or its record does not parse. */
export function secretBytesInStore(store: Pick<DocumentStore, 'get'>, name: string): Buffer | undefined {
  const d = store.get(secretsCollection, name);
  const r = d === undefined ? undefined : secretRecordSchema.safeParse(d.doc);
  return r?.success === true ? secretBytes(r.data) : undefined;
}
