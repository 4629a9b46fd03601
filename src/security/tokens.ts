// Join tokens. A token is `SHOAL1-<sha256 of the CA certificate's DER>-<id>.<secret>`: the
// fingerprint lets a new machine check the CA it is shown before it sends anything secret; the
// id names the record; the secret proves the holder was given the token. Only the SHA-256 of the
// secret is stored (in the replicated collection `shoal.join-tokens`), so a snapshot, a backup
// or a reader of the store cannot redeem one. The secret has 256 bits, so its hash needs no salt
// or stretching. Redemption is a compare-and-set on the record's revision, decided in apply on
// every node alike: of two redemptions of a single-use token at once, exactly one wins.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { TxnCommand } from '../../fsm/index.ts';
import type { JsonObject } from '../../fsm/types.ts';

export const tokensCollection = 'shoal.join-tokens';
/** Nodes that joined with a voter token: the autopilot promotes them once they have caught up. */
export const joinIntentsCollection = 'shoal.join-intents';

export const tokenRoles = ['voter', 'learner', 'client'] as const;
export type TokenRole = (typeof tokenRoles)[number];
export const clientRoles = ['admin', 'operator', 'reader'] as const;
export type ClientRole = (typeof clientRoles)[number];

export const tokenTtlMsDefault = 60 * 60 * 1000;
export const tokenTtlMsMax = 30 * 24 * 60 * 60 * 1000;
export const tokenUsesMax = 100;
export const tokenLabelsMax = 16;

const tokenPattern = /^SHOAL1-([0-9a-f]{64})-([0-9a-f]{16})\.([A-Za-z0-9_-]{43})$/;

export interface ParsedToken {
  caFingerprint: string;
  id: string;
  secret: string;
}

export function formatToken(t: ParsedToken): string {
  return `SHOAL1-${t.caFingerprint}-${t.id}.${t.secret}`;
}

/** The parts of a token, or null when the text is not one (a typo, a truncated paste). */
export function parseToken(text: string): ParsedToken | null {
  const m = tokenPattern.exec(text.trim());
  if (m === null) return null;
  return { caFingerprint: m[1] ?? '', id: m[2] ?? '', secret: m[3] ?? '' };
}

export function newToken(caFingerprint: string): ParsedToken {
  return { caFingerprint, id: randomBytes(8).toString('hex'), secret: randomBytes(32).toString('base64url') };
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

const redemptionSchema = z.object({
  atMs: z.number(),
  /** The node id (voter, learner) or principal (client) the token was exchanged for. */
  subject: z.string(),
  name: z.string(),
  from: z.string(),
}).strict();
export type Redemption = z.infer<typeof redemptionSchema>;

export const tokenRecordSchema = z.object({
  id: z.string(),
  role: z.enum(tokenRoles),
  /** For a client token: the role of the credential it is exchanged for. */
  clientRole: z.enum(clientRoles).optional(),
  secretSha256: z.string().regex(/^[0-9a-f]{64}$/),
  createdAtMs: z.number(),
  expiresAtMs: z.number(),
  usesMax: z.number().int().min(1).max(tokenUsesMax),
  usesLeft: z.number().int().min(0),
  labels: z.record(z.string(), z.string()),
  createdBy: z.string(),
  revoked: z.boolean(),
  redemptions: z.array(redemptionSchema).max(tokenUsesMax),
}).strict();
export type TokenRecord = z.infer<typeof tokenRecordSchema>;

/** What `token ls` shows: the record without the hash (useless to anyone, but no need to show it). */
export type TokenView = Omit<TokenRecord, 'secretSha256'> & { state: TokenState };
export type TokenState = 'active' | 'used' | 'expired' | 'revoked';

export function tokenState(r: TokenRecord, nowMs: number): TokenState {
  if (r.revoked) return 'revoked';
  if (r.usesLeft <= 0) return 'used';
  if (nowMs >= r.expiresAtMs) return 'expired';
  return 'active';
}

export function tokenView(r: TokenRecord, nowMs: number): TokenView {
  const { secretSha256: _hash, ...rest } = r;
  return { ...rest, state: tokenState(r, nowMs) };
}

export type RefusalReason = 'malformed' | 'other_cluster' | 'ca_rotated' | 'unknown' | 'bad_secret' | TokenState | 'wrong_role';

/** Why the token cannot be redeemed now, or undefined when it can. Constant-time on the secret. */
export function redeemRefusal(r: TokenRecord | undefined, token: ParsedToken, nowMs: number): RefusalReason | undefined {
  if (r === undefined) return 'unknown';
  const given = Buffer.from(hashSecret(token.secret), 'hex');
  const stored = Buffer.from(r.secretSha256, 'hex');
  if (given.length !== stored.length || !timingSafeEqual(given, stored)) return 'bad_secret';
  const state = tokenState(r, nowMs);
  return state === 'active' ? undefined : state;
}

/**
 * The redemption as one transaction: the record at revision `rev` with one use fewer and the
 * redemption appended, and for a voter the intent the autopilot acts on. Applied only if the
 * record is still at `rev` (nobody redeemed or revoked it meanwhile).
 */
export function redemptionTxn(r: TokenRecord, rev: number, redemption: Redemption): TxnCommand {
  const next: TokenRecord = { ...r, usesLeft: r.usesLeft - 1, redemptions: [...r.redemptions, redemption] };
  const ops: TxnCommand['success'] = [{ op: 'put', collection: tokensCollection, id: r.id, doc: next as unknown as JsonObject }];
  if (r.role === 'voter') {
    ops.push({ op: 'put', collection: joinIntentsCollection, id: redemption.subject, doc: { role: 'voter', token: r.id, atMs: redemption.atMs } });
  }
  return { op: 'txn', compare: [{ collection: tokensCollection, id: r.id, target: 'rev', cmp: '=', value: rev }], success: ops, failure: [] };
}

/** Human words for each refusal, said to the joining machine (the reason is in details). */
export const refusalText: Readonly<Record<RefusalReason, string>> = {
  malformed: 'this is not a shoal join token (SHOAL1-<fingerprint>-<id>.<secret>); copy it again',
  other_cluster: 'the token was made by another cluster (its CA fingerprint is not this cluster\'s)',
  ca_rotated: 'the token was made before this cluster\'s CA was rotated and names the retired CA; make a new one with shoal token create',
  unknown: 'no such token in this cluster (never made here, or its record was removed)',
  bad_secret: 'the token\'s secret is wrong',
  used: 'the token has been used as many times as it allows; make a new one with shoal token create',
  expired: 'the token has expired; make a new one with shoal token create',
  revoked: 'the token was revoked',
  active: 'the token is active',
  wrong_role: 'the token is for another kind of join (a client token logs in with shoal login; a node token joins with shoal join)',
};
