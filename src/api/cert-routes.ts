// Revoked certificates (admin): POST /v1/certificates/revoked puts a serial on the replicated
// deny-list (src/security/revoked-serials.ts), GET lists it. Every node then refuses that
// certificate at each handshake, on the client API (401 unauthenticated, reason revoked) and on
// the peer transport (refusal `revoked`), and closes the connections already open with it. This
// plugin also holds the API's side of that closing (cert-sockets.ts).

import { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { CA_VALID_DAYS_DEFAULT } from '../security/cert-lifetimes.ts';
import { nodeIdFromCertPem } from '../security/identity.ts';
import { revokedSerialsOf } from '../security/revoked-index.ts';
import {
  addRevocation, parseSerial, revocationReasonBytesMax, revokedCertsCollection, revokedListId, revokedListOf, type Revocation,
} from '../security/revoked-serials.ts';
import { issuerIn, splitPem } from '../security/ca-bundle.ts';
import type { ApiContext } from './context.ts';
import { CertSockets } from './cert-sockets.ts';
import { readBarrier } from './docs-routes.ts';
import { noQuery, readQuery } from './request-schemas.ts';
import { validate } from './validate.ts';
import { principalOf, propose, throwIfFailed } from './write-path.ts';
import { issuedByBundle } from '../security/ca-bundle.ts';

const pem = z.string().min(1).max(16 * 1024);
export const revokeBody = z.object({
  serial: z.string().max(64).refine((s) => parseSerial(s) !== null, 'a serial is 1 to 40 hex digits (colons allowed, any case)').optional(),
  certPem: pem.optional(),
  reason: z.string().max(revocationReasonBytesMax).optional(),
}).strict().refine((b) => (b.serial === undefined) !== (b.certPem === undefined), { message: 'give the serial or the certificate (certPem), one of the two', path: ['serial'] });

export const renewNowBody = z.object({
  /** Revoke the certificate the node used until now, once the new one is in place. */
  revokeOld: z.boolean().default(false),
  reason: z.string().max(revocationReasonBytesMax).optional(),
}).strict();

/** Concurrent revocations meet on the list's revision; each retries this many times. */
const casAttemptsMax = 5;
const dayMs = 24 * 60 * 60 * 1000;

function caPemOf(ctx: ApiContext): string | undefined {
  return ctx.security?.caPem ?? (ctx.auth.mode === 'tls' ? ctx.auth.tls.caPem : undefined);
}

/** What the entry says of the certificate: from its PEM when shown, else its serial alone. */
function describe(ctx: ApiContext, body: z.infer<typeof revokeBody>): Pick<Revocation, 'serial' | 'kind' | 'subject' | 'notAfterMs'> {
  if (body.certPem === undefined) return { serial: parseSerial(body.serial ?? '') ?? '', kind: 'unknown' };
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(body.certPem);
  } catch {
    throw new ShoalError('bad_request', 'certPem is not a PEM X.509 certificate', { problems: [{ path: 'body.certPem', message: 'not a PEM X.509 certificate' }] });
  }
  if (cert.ca) throw new ShoalError('bad_request', 'that is a CA certificate: a CA is not revoked, it is rotated (docs/security.md, "Rotating the CA")', { problems: [{ path: 'body.certPem', message: 'a CA certificate' }] });
  const caPem = caPemOf(ctx);
  // Any CA of the trust bundle (two during a CA rotation).
  if (caPem !== undefined && issuerIn(body.certPem, caPem) === undefined) {
    throw new ShoalError('bad_request', "the certificate was not issued by this cluster's CA: it is refused already", { problems: [{ path: 'body.certPem', message: "not issued by this cluster's CA" }] });
  }
  const subject = cert.subject.split('\n').join(', ');
  const kind = /(^|\n)OU=/.test(cert.subject) ? 'client' : nodeIdFromCertPem(body.certPem) !== null ? 'node' : 'unknown';
  return { serial: cert.serialNumber.toLowerCase(), kind, subject: subject.slice(0, 256), notAfterMs: Date.parse(cert.validTo) };
}

/**
 * When the entry may go: a client certificate is useless after its notAfter; a node certificate
 * still renews after its own (POST /v1/join/renew), so only the CA's end bounds it.
 */
function expiresAtMs(ctx: ApiContext, d: Pick<Revocation, 'kind' | 'notAfterMs'>, nowMs: number): number {
  const caPem = caPemOf(ctx);
  // The latest end of the trusted CAs: during a CA rotation, a node certificate renews under the new one.
  const caEndMs = caPem !== undefined ? Math.max(...splitPem(caPem).map((p) => Date.parse(new X509Certificate(p).validTo))) : nowMs + CA_VALID_DAYS_DEFAULT * dayMs;
  return d.kind === 'client' && d.notAfterMs !== undefined ? Math.min(d.notAfterMs, caEndMs) : caEndMs;
}

async function revoke(ctx: ApiContext, req: FastifyRequest, body: z.infer<typeof revokeBody>): Promise<{ entry: Revocation; added: boolean; rev: number }> {
  const d = describe(ctx, body);
  for (let attempt = 1; ; attempt++) {
    await readBarrier(ctx, 'linearizable');
    const nowMs = Date.now();
    const current = ctx.store.get(revokedCertsCollection, revokedListId);
    const entry: Revocation = {
      ...d, expiresAtMs: expiresAtMs(ctx, d, nowMs), revokedAtMs: nowMs, revokedBy: principalOf(req), ...(body.reason !== undefined ? { reason: body.reason } : {}),
    };
    const out = addRevocation(revokedListOf(current?.doc), entry, nowMs);
    if (!out.added && current !== undefined) return { entry: out.entry, added: false, rev: current.rev };
    const result = await propose(ctx, req, {
      op: 'put', collection: revokedCertsCollection, id: revokedListId, doc: out.list as never, expect: current === undefined ? { absent: true } : { rev: current.rev },
    }, () => 'body');
    const lost = !result.ok && (result.error.code === 'revision_mismatch' || result.error.code === 'already_exists');
    if (lost && attempt < casAttemptsMax) continue;
    throwIfFailed(result);
    if (result.kind !== 'put') throw new ShoalError('internal', `unexpected result ${result.kind}`);
    return { entry: out.entry, added: true, rev: result.doc.rev };
  }
}

function serialOf(certPem: string): string {
  return new X509Certificate(certPem).serialNumber.toLowerCase();
}

/**
 * This node renews its certificate now (a new key, as the scheduled renewal does), and with
 * `revokeOld` revokes the one it used: how a node whose key leaked stays a member. Its peers
 * close the connections made with the old certificate, and it redials with the new one.
 */
async function renewNow(ctx: ApiContext, req: FastifyRequest, body: z.infer<typeof renewNowBody>): Promise<Record<string, unknown>> {
  if (ctx.auth.mode !== 'tls' || ctx.renewCertificate === undefined) {
    throw new ShoalError('bad_request', 'this node serves its API without TLS (api.insecureLoopback): it renews its certificate on its own schedule only', { problems: [{ path: 'body', message: 'no TLS on this node\'s API' }] });
  }
  const tls = ctx.auth.tls;
  const oldPem = tls.certPem;
  try {
    await ctx.renewCertificate();
  } catch (err) {
    throw new ShoalError('ca_key_unavailable', `no member holding the CA key renewed this node's certificate: ${(err as Error).message}`);
  }
  const answer = { nodeId: ctx.node.id, oldSerial: serialOf(oldPem), newSerial: serialOf(tls.certPem) };
  if (!body.revokeOld) return answer;
  const { entry } = await revoke(ctx, req, { certPem: oldPem, reason: body.reason ?? `replaced by ${answer.newSerial}` });
  return { ...answer, revoked: entry };
}

const closedWhy = { revoked: 'revoked', removed: 'of a removed node', untrusted: 'issued by a CA this cluster no longer trusts' } as const;

/** Closes the API connections of certificates revoked, of nodes removed, or of a retired CA, once that applies here. */
function closeRefusedConnections(app: FastifyInstance, ctx: ApiContext): void {
  if (ctx.auth.mode !== 'tls') return;
  const revoked = revokedSerialsOf(ctx.store);
  const security = ctx.security;
  const sockets = new CertSockets({
    isRevoked: (serial) => revoked.has(serial),
    isRemoved: (id) => ctx.node.isRemoved(id),
    ...(security !== undefined ? { isTrusted: (der: Buffer) => issuedByBundle(der, security.caPem) } : {}),
    onClosed: (why, who) => ctx.node.log.info(`closed a client API connection of ${who}: its certificate was ${closedWhy[why]}`),
  });
  const onSecure = (socket: TLSSocket): void => sockets.track(socket);
  app.server.on('secureConnection', onSecure);
  const stopRevoked = revoked.onRevoked((keys) => sockets.closeRevoked(keys));
  const onApplied = (): void => { sockets.closeRemoved(); };
  ctx.node.on('applied', onApplied);
  // The node tells when its trust bundle changed (a CA rotation moving on, ca-rotation-agent.ts).
  const stopTls = ctx.onTlsReloaded?.(() => { sockets.closeUntrusted(); }) ?? (() => undefined);
  app.addHook('onClose', async () => {
    app.server.off('secureConnection', onSecure);
    stopRevoked();
    ctx.node.off('applied', onApplied);
    stopTls();
  });
}

export const certRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  closeRefusedConnections(app, ctx);

  app.post('/v1/certificates/revoked', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [revokeBody, req.body] });
    const { entry, added, rev } = await revoke(ctx, req, v.body);
    if (added) ctx.events?.recordEvent('certificate.revoked', entry.serial, { kind: entry.kind, by: entry.revokedBy });
    return reply.status(added ? 201 : 200).send({ ...entry, added, rev });
  });

  app.post('/v1/certificates/renew', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [renewNowBody, req.body ?? {}] });
    return renewNow(ctx, req, v.body);
  });

  app.get('/v1/certificates/revoked', { config: { role: 'admin' } }, async (req) => {
    const v = validate({ query: [readQuery, req.query] });
    await readBarrier(ctx, v.query.consistency);
    const doc = ctx.store.get(revokedCertsCollection, revokedListId);
    const items = revokedListOf(doc?.doc).entries.sort((a, b) => a.revokedAtMs - b.revokedAtMs);
    return { items, rev: ctx.store.revision };
  });
};
