// Routes a member node calls about its own certificate, proving who it is by its node key rather
// than by a token. POST /v1/join/ca-key: a voter gets the CA key, sealed to its certificate's key
// (only it can open the answer). POST /v1/join/renew: a member (even one whose certificate has
// expired) gets a new certificate for a new key, by signing the request with its current key.
// Neither is answered for a removed node, one that is not a member, or a revoked certificate.

import { X509Certificate, verify as verifySignature } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { splitHostPort } from '../base/host-port.ts';
import { issuerIn } from '../security/ca-bundle.ts';
import { withChain, type Signer } from '../security/ca-rotation-authority.ts';
import { nodeIdFromCertPem } from '../security/identity.ts';
import { revokedSerialsOf } from '../security/revoked-index.ts';
import { sealForCert } from '../security/sealed-box.ts';
import type { ApiContext } from './context.ts';
import { requireAuthority } from './token-routes.ts';
import { validate } from './validate.ts';
import { vipAddresses } from '../resources/vips.ts';

const pem = z.string().min(1).max(16 * 1024);
export const caKeyBody = z.object({ nodeId: z.string().min(1).max(64), certPem: pem }).strict();
export const renewBody = z.object({ nodeId: z.string().min(1).max(64), certPem: pem, csr: pem, proof: z.string().min(1).max(512) }).strict();
const noQuery = z.object({}).strict();

function refuse(reason: 'not_issued' | 'wrong_node' | 'not_member' | 'not_voter' | 'bad_proof' | 'revoked', message: string): never {
  throw new ShoalError('certificate_refused', message, { reason });
}

/** The presented certificate, checked: issued by this cluster's CA (expiry aside), not revoked, naming `nodeId`, a member not removed. */
export function memberCert(ctx: ApiContext, nodeId: string, certPem: string): X509Certificate {
  const authority = requireAuthority(ctx);
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch {
    return refuse('not_issued', 'the certificate is not a PEM X.509 certificate');
  }
  // Any CA of the trust bundle (two during a CA rotation).
  if (issuerIn(certPem, authority.caPem) === undefined) refuse('not_issued', 'the certificate was not issued by this cluster\'s CA');
  // A revoked serial renews to nothing: whoever holds its key would get a fresh, unrevoked one.
  if (revokedSerialsOf(ctx.store).has(cert.serialNumber)) refuse('revoked', `the certificate with serial ${cert.serialNumber.toLowerCase()} was revoked`);
  if (nodeIdFromCertPem(certPem) !== nodeId) refuse('wrong_node', `the certificate does not name node ${nodeId}`);
  if (ctx.node.isRemoved(nodeId)) throw new ShoalError('removed', `node ${nodeId} was removed from this cluster`, { member: nodeId });
  if (ctx.node.membership.get(nodeId) === undefined) refuse('not_member', `node ${nodeId} is not a member of this cluster`);
  return cert;
}

export function signerOf(ctx: ApiContext): Signer {
  if (ctx.nodeLock?.locked === true) throw new ShoalError('node_locked', `node ${ctx.node.id} is autolocked: it signs no certificate until it is unlocked (shoal unlock); ask another voter`);
  const signer: Signer | undefined = requireAuthority(ctx).signer();
  if (signer === undefined) throw new ShoalError('ca_key_unavailable', `node ${ctx.node.id} does not hold the cluster CA key; ask a voter that does`);
  return signer;
}

export const nodeCertRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.post('/v1/join/ca-key', { config: { role: 'public' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [caKeyBody, req.body] });
    // As for renewal: a revocation or removal committed before this request is applied here first.
    await ctx.node.readBarrier();
    memberCert(ctx, v.body.nodeId, v.body.certPem);
    if (!ctx.node.confState().voters.includes(v.body.nodeId)) refuse('not_voter', `node ${v.body.nodeId} is not a voter; the CA key goes to voters only`);
    const signer = signerOf(ctx);
    ctx.events?.recordEvent('ca.key.sent', v.body.nodeId, { by: ctx.node.id });
    return { sealed: sealForCert(v.body.certPem, signer.keyPem) };
  });

  app.post('/v1/join/renew', { config: { role: 'public' } }, async (req) => {
    const v = validate({ query: [noQuery, req.query], body: [renewBody, req.body] });
    // Every revocation committed before this request is applied here before the check.
    await ctx.node.readBarrier();
    const cert = memberCert(ctx, v.body.nodeId, v.body.certPem);
    // Possession of the current key: it signed the new request's text.
    let proven = false;
    try {
      proven = verifySignature('sha256', Buffer.from(v.body.csr), cert.publicKey, Buffer.from(v.body.proof, 'base64'));
    } catch {
      proven = false;
    }
    if (!proven) refuse('bad_proof', 'the proof is not a signature of the request by the key of the presented certificate');
    const signer = signerOf(ctx);
    const { verifyCsr, signNodeCsr } = await import('../security/csr.ts');
    const csr = await verifyCsr(v.body.csr);
    const m = ctx.node.membership.get(v.body.nodeId);
    // The cluster's virtual IPs too (issue 38): the API answers on a VIP under any node's certificate.
    const hosts = ['127.0.0.1', 'localhost', '::1', ...(m === undefined ? [] : [splitHostPort(m.peerAddress).host, splitHostPort(m.apiAddress).host]), ...vipAddresses(ctx.store)];
    const signed = await signNodeCsr(signer, csr, v.body.nodeId, { hosts });
    ctx.events?.recordEvent('certificate.renewed', v.body.nodeId, { serial: signed.serial, expired: Date.parse(cert.validTo) < Date.now() });
    // During a CA rotation's reissue phase the chain carries the rollover certificate.
    return { certPem: withChain(signed.certPem, signer) };
  });
};
