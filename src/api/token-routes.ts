// Join tokens (admin): POST /v1/tokens makes one and answers its text, the only time the secret
// is shown; GET /v1/tokens lists them (without hashes); DELETE /v1/tokens/{id} revokes one (the
// record stays, so what it was used for stays readable). src/security/tokens.ts has the format.

import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { encodeCommand, type Command } from '../../fsm/index.ts';
import type { CommandResult, JsonObject } from '../../fsm/types.ts';
import { ShoalError } from '../errors.ts';
import {
  clientRoles, formatToken, hashSecret, newToken, tokenLabelsMax, tokenRecordSchema, tokenRoles, tokensCollection,
  tokenTtlMsDefault, tokenTtlMsMax, tokenUsesMax, tokenView, type TokenRecord,
} from '../security/tokens.ts';
import type { CaAuthority } from '../security/authority.ts';
import type { ApiContext } from './context.ts';
import { validate } from './validate.ts';
import { callerStamp, principalOf, stampLevel, type CallerStamp } from './write-path.ts';

const labelKey = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'a label key: 1-63 of A-Z a-z 0-9 . _ -');
export const createTokenBody = z.object({
  role: z.enum(tokenRoles),
  ttlMs: z.number().int().min(1000).max(tokenTtlMsMax).default(tokenTtlMsDefault),
  uses: z.number().int().min(1).max(tokenUsesMax).default(1),
  labels: z.record(labelKey, z.string().max(253)).refine((l) => Object.keys(l).length <= tokenLabelsMax, `at most ${tokenLabelsMax} labels`).default({}),
  clientRole: z.enum(clientRoles).optional(),
}).strict().refine((b) => b.clientRole === undefined || b.role === 'client', { message: 'clientRole is for client tokens only', path: ['clientRole'] });
export const tokenIdParams = z.object({ id: z.string().regex(/^[0-9a-f]{16}$/, 'a token id is 16 hex digits') }).strict();
const noQuery = z.object({}).strict();

export function requireAuthority(ctx: ApiContext): CaAuthority {
  if (ctx.security === undefined) throw new ShoalError('ca_key_unavailable', 'this node was started without its cluster CA (no tls/ca.crt): it cannot make or redeem join tokens');
  return ctx.security;
}

/** Proposes one store command under the caller's principal (and role); resolves with the store's answer. */
export async function proposeCommand(ctx: ApiContext, req: FastifyRequest | string, cmd: Command): Promise<CommandResult> {
  const stamp: CallerStamp = typeof req === 'string' ? { principal: req } : callerStamp(ctx, req);
  const { result } = await ctx.node.propose(encodeCommand({ cmd, ts: Date.now(), ...stamp }), { featureLevel: stampLevel(stamp) });
  return result as CommandResult;
}

/** The token records, read linearizably (or from the local copy, for the join route's own re-read). */
export function readToken(ctx: ApiContext, id: string): { record: TokenRecord; rev: number } | undefined {
  const d = ctx.store.get(tokensCollection, id);
  if (d === undefined) return undefined;
  const parsed = tokenRecordSchema.safeParse(d.doc);
  // A record that does not parse was not written by this code: treat it as absent.
  return parsed.success ? { record: parsed.data, rev: d.rev } : undefined;
}

export const tokenRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.post('/v1/tokens', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [createTokenBody, req.body ?? {}] });
    const authority = requireAuthority(ctx);
    const token = newToken(authority.fingerprint);
    const now = Date.now();
    const record: TokenRecord = {
      id: token.id, role: v.body.role, ...(v.body.role === 'client' ? { clientRole: v.body.clientRole ?? 'reader' } : {}),
      secretSha256: hashSecret(token.secret), createdAtMs: now, expiresAtMs: now + v.body.ttlMs,
      usesMax: v.body.uses, usesLeft: v.body.uses, labels: v.body.labels, createdBy: principalOf(req), revoked: false, redemptions: [],
    };
    const result = await proposeCommand(ctx, req, { op: 'put', collection: tokensCollection, id: token.id, doc: record as unknown as JsonObject, expect: { absent: true } });
    if (!result.ok) throw new ShoalError(result.error.code, result.error.message, result.error.details);
    return reply.status(201).send({ token: formatToken(token), ...tokenView(record, now) });
  });

  app.get('/v1/tokens', { config: { role: 'admin' } }, async (req) => {
    validate({ query: [noQuery, req.query] });
    await ctx.node.readBarrier();
    const now = Date.now();
    const items = ctx.store.list(tokensCollection, { limit: 1000 }).items
      .map((d) => tokenRecordSchema.safeParse(d.doc))
      .flatMap((p) => (p.success ? [tokenView(p.data, now)] : []))
      .sort((a, b) => a.createdAtMs - b.createdAtMs);
    return { items };
  });

  app.delete('/v1/tokens/:id', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ params: [tokenIdParams, req.params], query: [noQuery, req.query] });
    await ctx.node.readBarrier();
    const found = readToken(ctx, v.params.id);
    if (found === undefined) throw new ShoalError('not_found', `no join token ${v.params.id}`, { id: v.params.id });
    const next: TokenRecord = { ...found.record, revoked: true };
    const result = await proposeCommand(ctx, req, { op: 'put', collection: tokensCollection, id: v.params.id, doc: next as unknown as JsonObject, expect: { rev: found.rev } });
    if (!result.ok) throw new ShoalError(result.error.code, result.error.message, result.error.details);
    return tokenView(next, Date.now());
  });
};
