// Bearer credentials: `Authorization: Bearer shoal_<id>.<secret>`. The store keeps, in the
// reserved collection `shoal.credentials` under <id>, only the SHA-256 of the secret with the
// principal and role it stands for; the secret itself is shown once, when it is created.
// Revoking deletes the record, so every node refuses the token once it has applied the delete.
// A token expires at `expiresAtMs` (like a Nomad ACL token's ExpirationTTL): 90 days after it is
// made unless asked otherwise. A record without the field never expires: the release before
// expiry wrote such records, and `--ttl never` writes one when asked for explicitly.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { DocumentStore } from '../../fsm/index.ts';
import { clientRoles, type ClientRole } from '../security/roles.ts';

export const credentialsCollection = 'shoal.credentials';

const TOKEN_PATTERN = /^shoal_([0-9a-f]{16})\.([A-Za-z0-9_-]{43})$/;

export const bearerRecordSchema = z.object({
  kind: z.literal('bearer'),
  principal: z.string(),
  role: z.enum(clientRoles),
  /** SHA-256 of the secret, lowercase hex. */
  secretSha256: z.string().regex(/^[0-9a-f]{64}$/),
  createdBy: z.string(),
  /** The creating node's clock (ms), for listing only. */
  createdAtMs: z.number(),
  label: z.string().max(200).optional(),
  /** When the token stops working (ms since the epoch); absent: never (asked for, or written before expiry existed). */
  expiresAtMs: z.number().int().min(0).optional(),
}).strict();
export type BearerRecord = z.infer<typeof bearerRecordSchema>;

/** A new token's lifetime unless the request names one. */
export const bearerTtlMsDefault = 90 * 24 * 60 * 60 * 1000;
/** The longest lifetime a request may ask for (a token that must never expire asks for that, ttlMs null). */
export const bearerTtlMsMax = 366 * 24 * 60 * 60 * 1000;
/** The shortest: a token that expires before it can be used is a mistake. */
export const bearerTtlMsMin = 60 * 1000;

export interface NewBearer {
  id: string;
  token: string;
  secretSha256: string;
}

export function sha256Hex(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

/** A fresh token: 64 random bits of id, 256 of secret. */
export function newBearer(): NewBearer {
  const id = randomBytes(8).toString('hex');
  const secret = randomBytes(32).toString('base64url');
  return { id, token: `shoal_${id}.${secret}`, secretSha256: sha256Hex(secret) };
}

/** The id and secret of a well-formed token, or undefined. */
export function parseBearer(token: string): { id: string; secret: string } | undefined {
  const m = TOKEN_PATTERN.exec(token);
  return m === null ? undefined : { id: m[1] as string, secret: m[2] as string };
}

/** What a presented token stands for: its record, or why it is refused. */
export type BearerLookup =
  | { ok: true; record: BearerRecord & { id: string } }
  /** Malformed, unknown, revoked (its record deleted) or a wrong secret: indistinguishable on purpose. */
  | { ok: false; reason: 'unknown' }
  /** The right secret of a token whose time is up; only its holder learns this. */
  | { ok: false; reason: 'expired'; id: string; expiresAtMs: number };

/** Whether a record's token has expired at `nowMs`; a record without expiresAtMs never does. */
export function bearerExpired(record: BearerRecord, nowMs: number): boolean {
  return record.expiresAtMs !== undefined && nowMs >= record.expiresAtMs;
}

/** Looks a presented token up in the store; the secret is checked before expiry is told. */
export function lookupBearer(store: DocumentStore, token: string, nowMs: number = Date.now()): BearerLookup {
  const parsed = parseBearer(token);
  if (parsed === undefined) return { ok: false, reason: 'unknown' };
  const doc = store.get(credentialsCollection, parsed.id);
  if (doc === undefined) return { ok: false, reason: 'unknown' };
  const record = bearerRecordSchema.safeParse(doc.doc);
  if (!record.success) return { ok: false, reason: 'unknown' };
  const want = Buffer.from(record.data.secretSha256, 'hex');
  const got = Buffer.from(sha256Hex(parsed.secret), 'hex');
  if (!timingSafeEqual(want, got)) return { ok: false, reason: 'unknown' };
  if (bearerExpired(record.data, nowMs)) return { ok: false, reason: 'expired', id: parsed.id, expiresAtMs: record.data.expiresAtMs as number };
  return { ok: true, record: { ...record.data, id: parsed.id } };
}

export type { ClientRole };
