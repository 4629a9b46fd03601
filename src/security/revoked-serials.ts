// The deny-list of certificate serials: one certificate refused (a client certificate that
// leaked, a node's old certificate), where `shoal cluster remove` refuses every certificate of
// an id. It is one document of the admin-only collection `shoal.revoked-certs`, so it is
// replicated, in snapshots, and changed by a compare-and-set on its revision: the bound below is
// exact even when two admins revoke at once.
//
// An entry is dropped once the certificate can no longer be used for anything (`expiresAtMs`):
// for a client certificate that is its own notAfter (TLS refuses it after that); for a node
// certificate, or a serial whose certificate the revoker did not show, it is the CA's notAfter,
// because POST /v1/join/renew takes a node certificate past its own expiry (a node that was off
// for a long time renews with it), and no certificate of this CA outlives the CA. Entries are
// dropped when the next revocation is written, so the list never holds more than
// `revokedSerialsMax` entries, none expired at the time of the last change.

import { z } from 'zod';
import { ShoalError } from '../errors.ts';

export const revokedCertsCollection = 'shoal.revoked-certs';
/** The one document of the collection that holds the list. */
export const revokedListId = 'serials';
/**
 * Unexpired revocations held at most. At about 800 bytes an entry at worst, 1000 keep the
 * document under fsm's docBytesMax (1 MiB); a cluster that needs more has lost its CA in all
 * but name: rotate it.
 */
export const revokedSerialsMax = 1000;
export const revocationReasonBytesMax = 200;
/** Serials are at most 20 bytes (RFC 5280); ours are 16. */
const serialHexDigitsMax = 40;

/** What the revoker said about the certificate, when it showed it. */
export const certificateKinds = ['client', 'node', 'unknown'] as const;

export const revocationSchema = z.object({
  /** Lowercase hex, as certificates.ts returns it. */
  serial: z.string().regex(/^[0-9a-f]{1,40}$/),
  kind: z.enum(certificateKinds),
  /** The certificate's subject (`CN=alice, OU=admin, O=shoal`), when the revoker showed it. */
  subject: z.string().max(256).optional(),
  /** The certificate's own notAfter (ms since the epoch), when known. */
  notAfterMs: z.number().int().optional(),
  /** When the entry may be dropped: the certificate can no longer be used for anything (above). */
  expiresAtMs: z.number().int(),
  revokedAtMs: z.number().int(),
  revokedBy: z.string().max(256),
  reason: z.string().max(revocationReasonBytesMax).optional(),
});
export type Revocation = z.infer<typeof revocationSchema>;

export interface RevokedList {
  entries: Revocation[];
}

/**
 * The form two serials are compared in: lowercase, no colons, no leading zeros. Node prints
 * serials in upper case (X509Certificate, getPeerCertificate), OpenSSL with colons, and a DER
 * integer may or may not keep a leading zero byte.
 */
export function serialKey(serial: string): string {
  const hex = serial.replace(/:/g, '').toLowerCase().replace(/^0+/, '');
  return hex === '' ? '0' : hex;
}

/** A serial as an operator typed it (any case, colons allowed), in the stored form; null if it is not one. */
export function parseSerial(text: string): string | null {
  const hex = text.trim().replace(/:/g, '').toLowerCase();
  return /^[0-9a-f]+$/.test(hex) && hex.length <= serialHexDigitsMax ? hex : null;
}

/** The entries still in force at `nowMs`. */
export function pruneExpired(entries: readonly Revocation[], nowMs: number): Revocation[] {
  return entries.filter((e) => e.expiresAtMs > nowMs);
}

export interface RevokeOutcome {
  list: RevokedList;
  entry: Revocation;
  /** False when the serial was already on the list (the first entry stands). */
  added: boolean;
}

/**
 * The list with `entry` added and the expired entries dropped. A serial already listed keeps
 * its first entry. Refused with `limit_reached` once `max` unexpired entries are held.
 */
export function addRevocation(list: RevokedList, entry: Revocation, nowMs: number, max = revokedSerialsMax): RevokeOutcome {
  const kept = pruneExpired(list.entries, nowMs);
  const key = serialKey(entry.serial);
  const existing = kept.find((e) => serialKey(e.serial) === key);
  if (existing !== undefined) return { list: { entries: kept }, entry: existing, added: false };
  if (kept.length >= max) {
    throw new ShoalError('limit_reached', `${kept.length} certificates are revoked and not yet expired, the most the list holds (revokedSerialsMax ${max}); rotate the CA instead (docs/security.md, "Rotating the CA")`, { limit: 'revokedSerialsMax', max });
  }
  return { list: { entries: [...kept, entry] }, entry, added: true };
}

const storedListSchema = z.object({ entries: z.array(z.unknown()).max(revokedSerialsMax) });

/**
 * The list a stored document holds, entry by entry: an entry this release cannot read (a newer
 * release's) is left out rather than taking the others with it. An absent document is an empty list.
 */
export function revokedListOf(doc: unknown): RevokedList {
  const parsed = storedListSchema.safeParse(doc);
  if (!parsed.success) return { entries: [] };
  return { entries: parsed.data.entries.flatMap((e) => { const r = revocationSchema.safeParse(e); return r.success ? [r.data] : []; }) };
}
