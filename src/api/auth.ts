// Who is calling, and may they. Every route declares the weakest role that may call it
// (`config: { role }`); this onRequest hook finds the caller from the credential alone and
// refuses the rest: 401 unauthenticated without a valid credential, 403 forbidden with a role too
// weak, 429 too_many_requests once an address has failed too often (auth-rate-limit.ts).
//
// Credentials, in the order they are looked at (docs/security.md); a certificate whose serial
// is revoked (revoked-serials.ts) is refused whatever it says:
//   a client certificate signed by the cluster CA: CN=<principal>, OU=<role>, O=shoal;
//   a node certificate (no OU) of a node not removed: principal node:<id>, role admin. A node
//     forwarding a request names the original caller in X-Shoal-Principal and X-Shoal-Role; no
//     one else may;
//   a bearer token, Authorization: Bearer shoal_<id>.<secret> (bearer-tokens.ts).
// With `api.insecureLoopback` (plain HTTP on a loopback address, an explicit opt-in) there is no
// TLS and every caller without a token is trusted as admin: any local process could be anyone.

import { tokensCollection } from '../security/tokens.ts';
import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ShoalError } from '../errors.ts';
import type { Tls } from '../base/tls-material.ts';
import { nodeIdFromCert } from '../security/identity.ts';
import { isClientRole, roleAllows, type ClientRole, type RouteRole } from '../security/roles.ts';
import { AuthFailureLimiter } from './auth-rate-limit.ts';
import { credentialsCollection, lookupBearer } from './bearer-tokens.ts';
import { auditCollection } from './audit-records.ts';
import { revokedSerialsOf, type RevokedSource } from '../security/revoked-index.ts';
import { revokedCertsCollection } from '../security/revoked-serials.ts';
import { issuedByBundle } from '../security/ca-bundle.ts';

export const principalHeader = 'x-shoal-principal';
export const roleHeader = 'x-shoal-role';

export type ApiAuth =
  /** HTTPS with the node's certificate; every caller authenticates. */
  | { mode: 'tls'; tls: Tls }
  /** Plain HTTP on loopback (api.insecureLoopback): callers without a token are admin. */
  | { mode: 'insecure' };

export interface Caller {
  principal: string;
  role: ClientRole;
  /** How the caller proved it: what the audit and the log say. */
  via: 'certificate' | 'node' | 'token' | 'insecure' | 'none';
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The weakest role that may call the route; every route declares one (checked at registration). */
    role?: RouteRole;
  }
  interface FastifyRequest {
    caller: Caller;
  }
}

/** Collections whose records are for admins only, whichever route reads them. */
// Join token records: only hashes, but who made which token and what it joined is an admin's business.
// Revoked serials: which credential of whom was revoked, and why.
const adminCollections = new Set([credentialsCollection, auditCollection, tokensCollection, revokedCertsCollection]);

export function isAdminCollection(collection: string): boolean {
  return adminCollections.has(collection);
}

const nobody: Caller = { principal: 'anonymous', role: 'reader', via: 'none' };

function unauthenticated(message: string, reason: string): ShoalError {
  return new ShoalError('unauthenticated', message, { reason });
}

function peerCertificateOf(req: FastifyRequest): { socket: TLSSocket; cert: ReturnType<TLSSocket['getPeerCertificate']> } | undefined {
  const socket = req.raw.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function') return undefined;
  const cert = (socket as TLSSocket).getPeerCertificate();
  return cert === null || Object.keys(cert).length === 0 ? undefined : { socket: socket as TLSSocket, cert };
}

/** The original caller a node names when it forwards a request; the node itself otherwise. */
function forwardedCaller(req: FastifyRequest, nodeId: string): Caller {
  const principal = req.headers[principalHeader];
  if (typeof principal !== 'string' || principal === '') return { principal: `node:${nodeId}`, role: 'admin', via: 'node' };
  const role = req.headers[roleHeader];
  if (!isClientRole(role)) throw unauthenticated(`node ${nodeId} forwarded a request for ${principal} without a valid ${roleHeader} header`, 'forwarded_role');
  return { principal, role, via: 'node' };
}

/** What the certificate checks read besides the certificate: the revoked serials, the removed ids, the trust bundle. */
interface CertificateChecks {
  store: RevokedSource;
  node?: { isRemoved(id: string): boolean };
  /** The trust bundle now (it changes during a CA rotation); absent, the TLS handshake's verdict stands. */
  security?: { readonly caPem: string };
}

/** Per connection: whether its certificate chains to the bundle it was last checked against. */
const trustedSockets = new WeakMap<TLSSocket, { bundle: string; trusted: boolean }>();

/**
 * Whether a CA of the bundle in force issued the connection's certificate. The handshake checked
 * it against the bundle of its time; after a CA rotation retired a CA, a connection opened before
 * (a keep-alive, a resumed session) would otherwise keep a certificate of that CA accepted.
 */
function trustedNow(socket: TLSSocket, cert: ReturnType<TLSSocket['getPeerCertificate']>, bundle: string): boolean {
  const known = trustedSockets.get(socket);
  if (known !== undefined && known.bundle === bundle) return known.trusted;
  const trusted = Buffer.isBuffer(cert.raw) && issuedByBundle(cert.raw, bundle);
  trustedSockets.set(socket, { bundle, trusted });
  return trusted;
}

function certificateCaller(req: FastifyRequest, socket: TLSSocket, cert: ReturnType<TLSSocket['getPeerCertificate']>, checks: CertificateChecks): Caller {
  if (!socket.authorized) {
    throw unauthenticated(`the client certificate is not accepted (${String(socket.authorizationError)}): it must be signed by this cluster's CA and be valid now`, 'certificate');
  }
  if (checks.security !== undefined && !trustedNow(socket, cert, checks.security.caPem)) {
    throw unauthenticated('the client certificate was issued by a CA this cluster no longer trusts (its CA was rotated): sign in again (shoal login), or ask an admin for a new credential (docs/security.md, "Rotating the CA")', 'untrusted_ca');
  }
  // Checked on every request, not only at the TLS handshake: a connection opened before the
  // revocation applied is closed by cert-sockets.ts, and anything still in flight meets this.
  if (typeof cert.serialNumber === 'string' && revokedSerialsOf(checks.store).has(cert.serialNumber)) {
    throw unauthenticated(`the certificate with serial ${cert.serialNumber.toLowerCase()} was revoked (shoal cert revoked lists the revoked serials)`, 'revoked');
  }
  const ou = cert.subject?.OU;
  const cn = cert.subject?.CN;
  if (ou === undefined) {
    const nodeId = nodeIdFromCert(cert);
    if (nodeId === null) throw unauthenticated('the certificate names neither a node nor a client role', 'certificate');
    // A removed node keeps its certificate; the peer transport refuses it, and so must the API.
    if (checks.node?.isRemoved(nodeId) === true) throw unauthenticated(`node ${nodeId} was removed from this cluster; its certificate is refused`, 'removed');
    return forwardedCaller(req, nodeId);
  }
  if (!isClientRole(ou) || typeof cn !== 'string' || cn === '' || cn.startsWith('node')) {
    throw unauthenticated('the client certificate must say CN=<principal>, OU=<admin|operator|reader>', 'certificate');
  }
  return { principal: cn, role: ou, via: 'certificate' };
}

function tokenCaller(req: FastifyRequest, ctx: { store: Parameters<typeof lookupBearer>[0] }): Caller | undefined {
  const auth = req.headers.authorization;
  if (auth === undefined) return undefined;
  const m = /^Bearer\s+(\S+)$/i.exec(auth);
  const found = m === null ? undefined : lookupBearer(ctx.store, m[1] as string);
  if (found === undefined || (!found.ok && found.reason === 'unknown')) throw unauthenticated('the bearer token is malformed, unknown or revoked', 'token');
  if (!found.ok) {
    const at = new Date(found.expiresAtMs).toISOString();
    throw new ShoalError('unauthenticated', `the bearer token ${found.id} expired at ${at}: ask an admin for a new one ('shoal credential create'; docs/security.md, "Credentials")`, {
      reason: 'token_expired', id: found.id, expiresAtMs: found.expiresAtMs,
    });
  }
  return { principal: found.record.principal, role: found.record.role, via: 'token' };
}

/** Who the request comes from, from its credential alone. */
export function authenticate(req: FastifyRequest, auth: ApiAuth, ctx: { store: Parameters<typeof lookupBearer>[0] } & CertificateChecks): Caller {
  if (auth.mode === 'insecure') {
    const byToken = tokenCaller(req, ctx);
    if (byToken !== undefined) return byToken;
    const claimed = req.headers[principalHeader];
    const role = req.headers[roleHeader];
    return { principal: typeof claimed === 'string' && claimed !== '' ? claimed : 'anonymous', role: isClientRole(role) ? role : 'admin', via: 'insecure' };
  }
  const peer = peerCertificateOf(req);
  const caller = peer !== undefined ? certificateCaller(req, peer.socket, peer.cert, ctx) : tokenCaller(req, ctx);
  if (caller === undefined) throw unauthenticated('this API needs a credential: a client certificate of this cluster or Authorization: Bearer <token> (docs/security.md)', 'missing');
  if (caller.via !== 'node' && (req.headers[principalHeader] !== undefined || req.headers[roleHeader] !== undefined)) {
    throw new ShoalError('forbidden', `only a node may name another principal (${principalHeader}); the principal comes from your credential`, { reason: 'forged_principal' });
  }
  return caller;
}

/** The role a request needs: the route's, or admin when it reads an admin-only collection. */
export function neededRole(req: FastifyRequest): RouteRole {
  const declared = req.routeOptions.config?.role;
  // Only the not-found handler has no route, and a 404 tells nothing worth a credential.
  if (declared === undefined) return 'public';
  const params = req.params as { collection?: unknown } | undefined;
  const query = req.query as { collection?: unknown } | undefined;
  const collection = params?.collection ?? query?.collection;
  if (typeof collection === 'string' && adminCollections.has(collection) && declared !== 'public') return 'admin';
  return declared;
}

/** Registers the checks: every route declares a role, and every request is authenticated and authorized. */
export function useAuth(app: FastifyInstance, auth: ApiAuth, ctx: { store: Parameters<typeof lookupBearer>[0] } & CertificateChecks, limiter: AuthFailureLimiter): void {
  app.decorateRequest('caller', { getter: () => nobody });
  app.addHook('onRoute', (route) => {
    if (route.config?.role === undefined) throw new Error(`route ${String(route.method)} ${route.url} declares no role (config: { role })`);
  });
  app.addHook('onRequest', async (req, reply) => {
    const needed = neededRole(req);
    if (needed === 'public') return;
    const waitS = limiter.retryAfterSeconds(req.ip);
    if (waitS > 0) {
      void reply.header('retry-after', String(waitS));
      throw new ShoalError('too_many_requests', `too many failed authentications from ${req.ip}; retry in ${waitS} s`, { limit: 'authFailures', retryAfterSeconds: waitS });
    }
    let caller: Caller;
    try {
      caller = authenticate(req, auth, ctx);
    } catch (err) {
      limiter.fail(req.ip);
      throw err;
    }
    Object.defineProperty(req, 'caller', { value: caller, enumerable: true });
    if (!roleAllows(caller.role, needed)) {
      throw new ShoalError('forbidden', `${caller.principal} has role ${caller.role}; ${req.method} ${req.routeOptions.url ?? req.url} needs ${needed}`, { role: caller.role, needed });
    }
  });
}
