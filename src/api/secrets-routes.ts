// /v1/secrets: workload secrets (src/resources/secrets.ts). A value goes in (PUT) and never comes
// out: the reads answer metadata (size, digest, version, times, the services that use it), and
// the generic document routes leave the value out too (redact.ts). Writes are compare-and-set
// transactions at the control plane's feature level (control-write.ts), as the services' are.
// From feature level 6 the value is encrypted here, before it is proposed, under the cluster
// keyring's active key (its public half: any node can), so it is never in the log in the clear.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { deleteChange, putChange, type Plan } from '../resources/changes.ts';
import { activeKey, clusterKeysCollection, keyringId, readKeyring } from '../resources/cluster-keyring.ts';
import { sealSecretValue, type SealedValue } from '../resources/secret-crypto.ts';
import { featureLevelSecretsAtRest } from '../base/feature-level.ts';
import { secretsCollection } from '../resources/collections.ts';
import {
  secretMeta, secretMetaSchema, secretNamePattern, secretRecordSchema, secretValueBytesMax, servicesUsingSecret, jobsUsingSecret, writeSecret,
  type SecretMeta, type SecretRecord,
} from '../resources/secrets.ts';
import { isRegistrySecretName } from '../resources/registry-logins.ts';
import { isBackupTargetSecretName } from '../resources/backup-targets.ts';
import { allDocs, type ControlState, type Versioned } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { readOnlyQuery } from './control-schemas.ts';
import { readControl } from './control-views.ts';
import { decideAndWrite } from './control-write.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';
import { compareText } from '../base/order.ts';

export const secretParams = z.object({
  name: z.string().regex(secretNamePattern, 'must be a secret name (a DNS label: lower-case letters, digits and -, starting with a letter)')
    .refine((n) => !isRegistrySecretName(n), 'names of the form registry-<16 hex digits> hold registry passwords: use shoal registry login|logout|ls')
    .refine((n) => !isBackupTargetSecretName(n), 'names of the form backup-target-<name> hold backup targets\' credentials: use shoal backup target add|rm'),
}).strict();

const base64Text = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The value as UTF-8 text (`value`) or as bytes in base64 (`valueBase64`), exactly one. */
export const secretBody = z.object({
  value: z.string().optional(),
  valueBase64: z.string().regex(base64Text, 'must be base64 (standard alphabet, padded)').optional(),
}).strict().refine((b) => (b.value === undefined) !== (b.valueBase64 === undefined), {
  message: 'give the value as value (UTF-8 text) or as valueBase64 (bytes), exactly one of them',
});

/** What the reads answer of a secret: its metadata and the services whose specs name it. */
export interface SecretView extends SecretMeta {
  rev: number;
  usedBy: string[];
  /** The jobs whose spec names it. */
  usedByJobs: string[];
}

export const secretViewSchema = secretMetaSchema.extend({ rev: z.number().int(), usedBy: z.array(z.string()), usedByJobs: z.array(z.string()) });

function valueBytes(b: z.infer<typeof secretBody>): Buffer {
  const bytes = b.value !== undefined ? Buffer.from(b.value, 'utf8') : Buffer.from(b.valueBase64 ?? '', 'base64');
  if (bytes.length > secretValueBytesMax) {
    throw new ShoalError('payload_too_large', `the secret's value is ${bytes.length} bytes; a secret holds at most ${secretValueBytesMax} (secretValueBytesMax)`, {
      limit: 'secretValueBytesMax', max: secretValueBytesMax, size: bytes.length,
    });
  }
  return bytes;
}

/** The store's secrets that parse as records (one that does not is left out, as the control state does). */
function readSecrets(ctx: ApiContext): Versioned<SecretRecord>[] {
  const out: Versioned<SecretRecord>[] = [];
  for (const d of allDocs(ctx.store, secretsCollection)) {
    // A registry login's password is not a workload secret: registry ls shows the login.
    if (isRegistrySecretName(d.id)) continue;
    // Nor is a backup target's credential (shoal backup target ls shows the target).
    if (isBackupTargetSecretName(d.id)) continue;
    const r = secretRecordSchema.safeParse(d.doc);
    if (r.success) out.push({ value: r.data, rev: d.rev });
    else ctx.node.log.warn(`${secretsCollection}/${d.id} (rev ${d.rev}) is not a valid secret record and is not shown`);
  }
  return out;
}

function readSecret(ctx: ApiContext, name: string): Versioned<SecretRecord> | undefined {
  const d = ctx.store.get(secretsCollection, name);
  const r = d === undefined ? undefined : secretRecordSchema.safeParse(d.doc);
  return d === undefined || r?.success !== true ? undefined : { value: r.data, rev: d.rev };
}

function findSecret(ctx: ApiContext, name: string): Versioned<SecretRecord> {
  const s = readSecret(ctx, name);
  if (s === undefined) throw new ShoalError('not_found', `no secret named '${name}'; list them with: shoal secret ls`, { secret: name });
  return s;
}

/**
 * How a write stores the value: sealed under the keyring's active key from level 6 (refused with
 * cluster_key_unavailable until the leader has made the keyring, a moment after the level rises),
 * in the clear below it, as the older members read it.
 */
export function sealerFor(ctx: ApiContext, name: string): ((value: Uint8Array) => SealedValue) | null {
  if (ctx.node.featureLevel < featureLevelSecretsAtRest) return null;
  const found = readKeyring(ctx.store);
  if (found === undefined) {
    throw new ShoalError('cluster_key_unavailable', 'the cluster has no cluster key yet to encrypt secrets with (the leader makes one when the cluster reaches feature level 6); retry in a moment', { reason: 'no_keyring' });
  }
  const key = activeKey(found.keyring);
  return (value) => sealSecretValue(name, value, key);
}

/** A plain write must not land once the keyring exists: the value would stay in the clear in the log. */
export function noKeyringYet(plan: Plan, sealed: boolean): Plan {
  if (sealed) return plan;
  return { ...plan, compares: [...plan.compares, { collection: clusterKeysCollection, id: keyringId, target: 'exists', cmp: '=', value: false }] };
}

function viewOf(state: ControlState, s: Versioned<SecretRecord>): SecretView {
  return { ...secretMeta(s.value), rev: s.rev, usedBy: servicesUsingSecret(state, s.value.name), usedByJobs: jobsUsingSecret(state, s.value.name) };
}

export const secretsRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.put('/v1/secrets/:name', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [secretParams, req.params], query: [noQuery, req.query], body: [secretBody, req.body] });
    const bytes = valueBytes(v.body);
    const w = await decideAndWrite(ctx, req, `writing secret ${v.params.name}`, () => {
      const cur = readSecret(ctx, v.params.name);
      const seal = sealerFor(ctx, v.params.name);
      const next = writeSecret(v.params.name, bytes, ctx.node.logTimeNow(), cur?.value, seal);
      const outcome = cur === undefined ? 'created' as const : next === null ? 'unchanged' as const : 'updated' as const;
      const meta = secretMeta(next ?? cur?.value ?? assertNever());
      if (next === null) return { plan: null, answer: { outcome, meta } };
      return { plan: noKeyringYet({ changes: [putChange(secretsCollection, v.params.name, next, cur?.rev ?? null)], compares: [] }, seal !== null), answer: { outcome, meta } };
    });
    return { outcome: w.answer.outcome, secret: w.answer.meta, rev: w.rev };
  });

  app.get('/v1/secrets', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const items = readSecrets(ctx).map((s) => viewOf(state, s)).sort((a, b) => compareText(a.name, b.name));
    return { items, rev: state.revision };
  });

  app.get('/v1/secrets/:name', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [secretParams, req.params], query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    return { secret: viewOf(state, findSecret(ctx, v.params.name)), rev: state.revision };
  });

  app.delete('/v1/secrets/:name', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [secretParams, req.params], query: [noQuery, req.query] });
    const w = await decideAndWrite(ctx, req, `removing secret ${v.params.name}`, (state) => {
      const s = findSecret(ctx, v.params.name);
      const services = servicesUsingSecret(state, v.params.name);
      const jobs = jobsUsingSecret(state, v.params.name);
      if (services.length + jobs.length > 0) {
        const users = [
          ...(services.length > 0 ? [`${services.length === 1 ? 'service' : 'services'} ${services.join(', ')}`] : []),
          ...(jobs.length > 0 ? [`${jobs.length === 1 ? 'job' : 'jobs'} ${jobs.join(', ')}`] : []),
        ];
        const one = services.length + jobs.length === 1;
        throw new ShoalError('resource_in_use', `secret ${v.params.name} is used by ${users.join(' and ')}; apply ${one ? 'it' : 'them'} without it first (a rollback could return to a spec that names it, so a service's previous spec counts too)`, {
          secret: v.params.name, services, jobs,
        });
      }
      return { plan: { changes: [deleteChange(secretsCollection, v.params.name, s.rev)], compares: [] }, answer: null };
    });
    return { name: v.params.name, removed: true, rev: w.rev };
  });
};

function assertNever(): never {
  throw new Error('assertion: a secret write with neither a current nor a new record');
}
