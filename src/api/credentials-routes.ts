// /v1/credentials: bearer tokens for callers that hold no client certificate (scripts, CI, a
// Prometheus scraper). Admin only. A token is shown once, in the answer that creates it; the
// store keeps its SHA-256 (bearer-tokens.ts). Revoking deletes the record: every node refuses the
// token once it has applied the delete. A token expires `ttlMs` after it is made (default 90
// days, at most 366); `ttlMs: null` asks for one that never expires.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { clientRoles } from '../security/roles.ts';
import { isValidPrincipal, principalRule } from '../security/principal.ts';
import type { ApiContext } from './context.ts';
import {
  bearerExpired, bearerRecordSchema, bearerTtlMsDefault, bearerTtlMsMax, bearerTtlMsMin, credentialsCollection, newBearer, type BearerRecord,
} from './bearer-tokens.ts';
import { readBarrier } from './docs-routes.ts';
import { noQuery, readQuery } from './request-schemas.ts';
import { validate } from './validate.ts';
import { propose, throwIfFailed } from './write-path.ts';

export const createCredentialBody = z.object({
  principal: z.string().refine(isValidPrincipal, `a principal is ${principalRule}`),
  role: z.enum(clientRoles),
  label: z.string().max(200).optional(),
  /** How long the token works, in ms; null: it never expires (asked for explicitly); absent: 90 days. */
  ttlMs: z.number().int().min(bearerTtlMsMin, `a token lives at least ${bearerTtlMsMin / 1000} s`)
    .max(bearerTtlMsMax, `a token lives at most ${bearerTtlMsMax / 86_400_000} days; ask for ttlMs null (--ttl never) for one that never expires`)
    .nullable().default(bearerTtlMsDefault),
}).strict();
export const credentialParams = z.object({ id: z.string().regex(/^[0-9a-f]{16}$/, 'a credential id is 16 hex digits') }).strict();
/** Credentials listed at most; there is no paging (a homelab has a handful). */
const listedMax = 1000;

export interface CredentialView {
  id: string;
  principal: string;
  role: string;
  createdBy: string;
  createdAtMs: number;
  /** When it stops working; null: never (asked for, or made by a release before expiry existed). */
  expiresAtMs: number | null;
  /** Whether it has expired, by the clock of the node that answers. */
  expired: boolean;
  label: string | null;
  rev: number;
}

function viewOf(id: string, r: BearerRecord, rev: number, nowMs: number): CredentialView {
  return {
    id, principal: r.principal, role: r.role, createdBy: r.createdBy, createdAtMs: r.createdAtMs,
    expiresAtMs: r.expiresAtMs ?? null, expired: bearerExpired(r, nowMs), label: r.label ?? null, rev,
  };
}

/** Creates a bearer credential for `principal` with `role`; the answer holds the only copy of the token. */
export async function createBearerCredential(ctx: ApiContext, req: Parameters<typeof propose>[1], body: z.infer<typeof createCredentialBody>): Promise<CredentialView & { token: string }> {
  const fresh = newBearer();
  const now = Date.now();
  const record: BearerRecord = {
    kind: 'bearer', principal: body.principal, role: body.role, secretSha256: fresh.secretSha256,
    createdBy: req.caller.principal, createdAtMs: now, ...(body.label !== undefined ? { label: body.label } : {}),
    ...(body.ttlMs !== null ? { expiresAtMs: now + body.ttlMs } : {}),
  };
  const result = await propose(ctx, req, { op: 'put', collection: credentialsCollection, id: fresh.id, doc: record as never, expect: { absent: true } }, () => 'body');
  throwIfFailed(result);
  if (result.kind !== 'put') throw new ShoalError('internal', `unexpected result ${result.kind}`);
  return { ...viewOf(fresh.id, record, result.doc.rev, now), token: fresh.token };
}

export const credentialsRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.post('/v1/credentials', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [createCredentialBody, req.body] });
    const created = await createBearerCredential(ctx, req, v.body);
    return reply.status(201).send(created);
  });

  app.get('/v1/credentials', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [readQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const page = ctx.store.list(credentialsCollection, { limit: listedMax });
    const now = Date.now();
    const items = page.items.flatMap((d) => {
      const r = bearerRecordSchema.safeParse(d.doc);
      return r.success ? [viewOf(d.id, r.data, d.rev, now)] : [];
    });
    return { items, rev: page.rev };
  });

  app.delete('/v1/credentials/:id', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ params: [credentialParams, req.params], query: [noQuery, req.query] });
    await readBarrier(ctx, 'linearizable');
    const current = ctx.store.get(credentialsCollection, v.params.id);
    if (current === undefined) throw new ShoalError('not_found', `no credential ${v.params.id} (already revoked?)`, { id: v.params.id });
    // Exactly the record read: a token created again under the same id in between is not revoked by mistake.
    const result = await propose(ctx, req, { op: 'delete', collection: credentialsCollection, id: v.params.id, expect: { rev: current.rev } }, () => 'params.id');
    throwIfFailed(result);
    if (result.kind !== 'delete') throw new ShoalError('internal', `unexpected result ${result.kind}`);
    return { id: v.params.id, revoked: true, rev: result.rev };
  });
};
