// Bearer credentials: `Authorization: Bearer shoal_<id>.<secret>`. The store keeps, in the
// reserved collection `shoal.credentials` under <id>, only the SHA-256 of the secret with the
// principal and role it stands for; the secret itself is shown once, when it is created.
// Revoking deletes the record, so every node refuses the token once it has applied the delete.

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
}).strict();
export type BearerRecord = z.infer<typeof bearerRecordSchema>;

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

/** The record a token stands for, or undefined when it is malformed, unknown, revoked or wrong. */
export function lookupBearer(store: DocumentStore, token: string): (BearerRecord & { id: string }) | undefined {
  const parsed = parseBearer(token);
  if (parsed === undefined) return undefined;
  const doc = store.get(credentialsCollection, parsed.id);
  if (doc === undefined) return undefined;
  const record = bearerRecordSchema.safeParse(doc.doc);
  if (!record.success) return undefined;
  const want = Buffer.from(record.data.secretSha256, 'hex');
  const got = Buffer.from(sha256Hex(parsed.secret), 'hex');
  return timingSafeEqual(want, got) ? { ...record.data, id: parsed.id } : undefined;
}

export type { ClientRole };
