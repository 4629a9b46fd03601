// Workload secrets: a value (bytes) written through PUT /v1/secrets/{name}, kept in the replicated
// store (`shoal.secrets/<name>`) and delivered by the agents to the containers of the services
// that name it, as a file under /run/secrets/. The value goes one way: nothing the API reads back
// carries it (redactSecretValue is applied at every exit that can hand out a document of the
// collection), only its metadata (size, digest, version, times). docs/resources.md, "Secrets".
//
// From feature level 6 a record holds its value encrypted (`sealed`: secret-crypto.ts), never in
// the clear; a record written before (`value`, base64) is re-encrypted by the leader once the
// level is reached (src/control/secret-keyring.ts). docs/security.md, "Secrets at rest".

import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Compare, DocumentStore } from '../../fsm/index.ts';
import type { JsonObject } from '../../fsm/types.ts';
import { secretsCollection } from './collections.ts';
import type { Problem } from './spec/reader.ts';
import type { Assert, Same, ServiceSpec } from './spec/service-spec.ts';
import type { ControlState } from './state.ts';
import { sealedValueSchema, type SealedValue } from './secret-crypto.ts';

/** The largest secret value, in bytes (as Nomad's variables; a key, a certificate, a password file fit). */
export const secretValueBytesMax = 64 * 1024;

/** A secret's name: a DNS label, the rule service names follow. */
export const secretNamePattern = /^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

interface SecretFields {
  /** The document id. */
  name: string;
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

/** A record written below feature level 6: the value's bytes in the clear, base64. Never answered through the API. */
export interface PlainSecretRecord extends SecretFields {
  value: string;
}

/** A record of feature level 6: the value encrypted with a data key of its own, wrapped by the cluster key. */
export interface SealedSecretRecord extends SecretFields {
  sealed: SealedValue;
}

export type SecretRecord = PlainSecretRecord | SealedSecretRecord;

/** What the API answers about a secret: everything but the value. */
export type SecretMeta = SecretFields;

const nat = z.number().int().min(0);

const secretFields = {
  name: z.string().regex(secretNamePattern),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  size: nat.max(secretValueBytesMax),
  version: z.number().int().min(1),
  createdAt: nat,
  updatedAt: nat,
};

export const plainSecretRecordSchema = z.object({
  ...secretFields,
  value: z.string().max(Math.ceil(secretValueBytesMax / 3) * 4).regex(/^[A-Za-z0-9+/]*={0,2}$/),
}).strict();

export const sealedSecretRecordSchema = z.object({ ...secretFields, sealed: sealedValueSchema }).strict();

export const secretRecordSchema = z.union([plainSecretRecordSchema, sealedSecretRecordSchema]);

export const secretMetaSchema = z.object(secretFields).strict();

export type _SecretRecordMatchesSchema = Assert<Same<z.infer<typeof secretRecordSchema>, SecretRecord>>;

export function isSealed(r: SecretRecord): r is SealedSecretRecord {
  return 'sealed' in r;
}

export function secretDigest(bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** The bytes of a plain record's value. */
export function plainSecretBytes(r: PlainSecretRecord): Buffer {
  return Buffer.from(r.value, 'base64');
}

export function secretMeta(r: SecretRecord): SecretMeta {
  return { name: r.name, digest: r.digest, size: r.size, version: r.version, createdAt: r.createdAt, updatedAt: r.updatedAt };
}

/**
 * The record after writing `bytes` to the secret `name` (`cur` is the record there now, if any),
 * or null when the value is the one it already holds: a write of the same value is no change.
 * With `seal` (feature level 6) the value is encrypted; without, it is written as an older
 * release reads it, in the clear.
 */
export function writeSecret(name: string, bytes: Uint8Array, now: number, cur: SecretRecord | undefined, seal: ((value: Uint8Array) => SealedValue) | null): SecretRecord | null {
  if (bytes.length > secretValueBytesMax) throw new Error(`assertion: a secret of ${bytes.length} bytes passed the size check`);
  const digest = secretDigest(bytes);
  if (cur !== undefined && cur.digest === digest && cur.size === bytes.length) return null;
  const fields: SecretFields = { name, digest, size: bytes.length, version: cur === undefined ? 1 : cur.version + 1, createdAt: cur?.createdAt ?? now, updatedAt: now };
  return seal === null ? { ...fields, value: Buffer.from(bytes).toString('base64') } : { ...fields, sealed: seal(bytes) };
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

/** The jobs whose spec names the secret (a run's tasks run the job's spec: it reads the secret at each start). */
export function jobsUsingSecret(state: ControlState, name: string): string[] {
  const users: string[] = [];
  for (const j of state.jobs?.values() ?? []) if (j.value.spec.secrets.some((ref) => ref.name === name)) users.push(j.value.name);
  return users.sort();
}

/**
 * A document of `collection` as the API may hand it out: a secret's without its value (plain or
 * sealed), any other as it is. Every read path that can answer a document of the store goes
 * through this (src/api/redact.ts): the value leaves a node only to an agent that runs a task
 * naming it (and, sealed, in snapshots).
 */
export function redactSecretValue(collection: string, doc: JsonObject): JsonObject {
  if (collection !== secretsCollection || (!Object.hasOwn(doc, 'value') && !Object.hasOwn(doc, 'sealed'))) return doc;
  const { value: _withheld, sealed: _sealed, ...rest } = doc;
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

/** The record of the secret `name` in `store` (a node's applied store); undefined when there is none or it does not parse. */
export function secretInStore(store: Pick<DocumentStore, 'get'>, name: string): SecretRecord | undefined {
  const d = store.get(secretsCollection, name);
  const r = d === undefined ? undefined : secretRecordSchema.safeParse(d.doc);
  return r?.success === true ? r.data : undefined;
}
