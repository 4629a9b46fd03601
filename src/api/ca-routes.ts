// The CA rotation (docs/security.md, "Rotating the CA"). GET /v1/ca/rotation (reader): where it
// is, who it waits for, and the CAs this node trusts (the CLI pins them). POST /v1/ca/rotate
// (admin, on the leader): starts a rotation, or moves it one phase on once every member is ready;
// `shoal ca rotate` calls it until the rotation is done. POST /v1/ca/next-key (public, the node's
// certificate and key are the proof): a voter gets the new CA key, sealed to its certificate.
// POST /v1/ca/client-cert (admin, as every write of credentials): an admin with a client
// certificate gets a new one for a new key, same principal, from the CA that signs now, so the
// credential `shoal ca rotate` runs with outlives the old CA (others log in again).

import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { bundleFingerprints, withChainOf } from '../security/ca-bundle.ts';
import { heldKeyFor, readOwnRotation } from '../security/ca-rotation-authority.ts';
import { rotateStep, viewOf } from '../security/ca-rotation-driver.ts';
import { sealForCert } from '../security/sealed-box.ts';
import type { ApiContext, CaRotationPort } from './context.ts';
import { memberCert, signerOf } from './node-cert-routes.ts';
import { noQuery, readQuery } from './request-schemas.ts';
import { requireAuthority } from './token-routes.ts';
import { validate } from './validate.ts';
import { forwardIfFollower } from './write-path.ts';

const pem = z.string().min(1).max(16 * 1024);
export const rotateBody = z.object({}).strict().optional();
export const nextKeyBody = z.object({ nodeId: z.string().min(1).max(64), certPem: pem, rotation: z.string().max(64) }).strict();
export const clientCertBody = z.object({ csr: z.string().min(1).max(8 * 1024) }).strict();

/** Where this node keeps the CA keys (its data directory); absent, the rotation routes are refused. */
function portOf(ctx: ApiContext): CaRotationPort {
  if (ctx.caRotation === undefined) throw new ShoalError('ca_key_unavailable', 'this node was started without a data directory for CA keys: it cannot take part in a CA rotation');
  return ctx.caRotation;
}

function rotationView(ctx: ApiContext): ReturnType<typeof viewOf> | null {
  const r = readOwnRotation(ctx.store, requireAuthority(ctx).caPem)?.rotation;
  return r === undefined ? null : viewOf(ctx, r);
}

/** The caller's own client certificate is what is renewed: a bearer token or a node has none. */
function clientOf(req: FastifyRequest): { principal: string; role: 'admin' | 'operator' | 'reader' } {
  const c = req.caller;
  if (c.via === 'certificate' || (c.via === 'node' && !c.principal.startsWith('node:'))) return { principal: c.principal, role: c.role };
  throw new ShoalError('bad_request', `${c.principal} did not authenticate with a client certificate (${c.via}); only a client certificate is renewed here`, {
    problems: [{ path: 'credential', message: 'a client certificate is needed' }],
  });
}

export const caRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/ca/rotation', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readQuery, req.query] });
    if (v.query.consistency === 'linearizable') await ctx.node.readBarrier();
    const caPem = requireAuthority(ctx).caPem;
    return { rotation: rotationView(ctx), trusted: bundleFingerprints(caPem), caPem };
  });

  app.post('/v1/ca/rotate', { config: { role: 'admin' } }, async (req, reply) => {
    validate({ query: [noQuery, req.query], body: [rotateBody, req.body] });
    if (await forwardIfFollower(ctx, req, reply)) return reply;
    const step = await rotateStep({ node: ctx.node, store: ctx.store, authority: requireAuthority(ctx), dataDir: portOf(ctx).dataDir }, req.caller.principal);
    if (step.did !== 'nothing' && step.rotation !== null) {
      ctx.events?.recordEvent(step.did === 'started' ? 'ca.rotation.started' : 'ca.rotation.phase', step.rotation.id, { phase: step.rotation.phase, by: req.caller.principal });
    }
    return step;
  });

  app.post('/v1/ca/next-key', { config: { role: 'public' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [nextKeyBody, req.body] });
    await ctx.node.readBarrier();
    memberCert(ctx, v.body.nodeId, v.body.certPem);
    if (!ctx.node.confState().voters.includes(v.body.nodeId)) {
      throw new ShoalError('certificate_refused', `node ${v.body.nodeId} is not a voter; the CA key goes to voters only`, { reason: 'not_voter' });
    }
    const r = readOwnRotation(ctx.store, requireAuthority(ctx).caPem)?.rotation;
    if (r === undefined || r.id !== v.body.rotation || (r.phase !== 'add' && r.phase !== 'reissue')) {
      throw new ShoalError('not_found', `no CA rotation ${v.body.rotation} is adding a CA now`, { rotation: v.body.rotation });
    }
    const keyPem = heldKeyFor(portOf(ctx).dataDir, r.newCaPem);
    if (keyPem === undefined) throw new ShoalError('ca_key_unavailable', `node ${ctx.node.id} does not hold the new CA key yet; ask another voter`);
    ctx.events?.recordEvent('ca.key.sent', v.body.nodeId, { by: ctx.node.id, rotation: r.id });
    return { sealed: sealForCert(v.body.certPem, keyPem) };
  });

  app.post('/v1/ca/client-cert', { config: { role: 'admin' } }, async (req, reply) => {
    const v = validate({ query: [noQuery, req.query], body: [clientCertBody, req.body] });
    const client = clientOf(req);
    // A node without the CA key (a learner) hands the request to the leader, which holds it.
    if (requireAuthority(ctx).signer() === undefined && await forwardIfFollower(ctx, req, reply)) return reply;
    const signer = signerOf(ctx);
    const { verifyCsr } = await import('../security/csr.ts');
    const csr = await verifyCsr(v.body.csr);
    const { issueClientCert } = await import('../security/client-certs.ts');
    const signed = await issueClientCert(signer, { principal: client.principal, role: client.role, publicKey: csr.publicKey });
    ctx.events?.recordEvent('certificate.issued', client.principal, { role: client.role, serial: signed.serial, by: ctx.node.id });
    return { certPem: withChainOf(signed.certPem, signer.chainPem), serial: signed.serial, principal: client.principal, role: client.role };
  });
};
