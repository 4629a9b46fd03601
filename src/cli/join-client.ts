// The calls `shoal join` and `shoal login` make before the machine trusts the cluster: they
// fetch the CA over TLS trusting nothing yet, check it against the token's fingerprint, and only
// then send the token and the certificate request over TLS that trusts that CA alone. Both go
// through `joinRequest`, the one place that knows how to reach a node that is not trusted yet.
// Plain HTTP is used only for a loopback address whose API does not speak TLS (a test or dev
// cluster with api.insecureLoopback), never across the network.

import { Agent } from 'undici';
import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { isLoopbackHost, splitHostPort } from '../server/config.ts';
import { fingerprintOf } from '../security/authority.ts';
import { checkNodeServerIdentity } from '../security/tls-identity.ts';
import type { ParsedToken } from '../security/tokens.ts';
import { apiErrorFrom, CliFailure, UnreachableError } from './client.ts';
import { exitCodes } from './args.ts';

/** Whom to trust: nothing (the CA fetch, checked by fingerprint afterwards) or the checked CA. */
export type JoinTrust = { kind: 'none' } | { kind: 'ca'; caPem: string };

export const joinRequestTimeoutMs = 30_000;

function agentFor(trust: JoinTrust): Agent {
  return new Agent({
    connect: trust.kind === 'none'
      // Nothing to check against yet: the fingerprint check on what comes back is the check.
      ? { rejectUnauthorized: false, minVersion: 'TLSv1.3' }
      : { ca: trust.caPem, minVersion: 'TLSv1.3', checkServerIdentity: checkNodeServerIdentity },
  });
}

async function fetchOnce(url: string, method: string, body: unknown, agent: Agent | undefined): Promise<Response> {
  return fetch(url, {
    method, headers: { accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}), signal: AbortSignal.timeout(joinRequestTimeoutMs),
    ...(agent !== undefined ? { dispatcher: agent } : {}),
  } as RequestInit);
}

/** One JSON call to a node for a join or a login, over TLS as `trust` says. */
export async function joinRequest<T>(addr: string, method: string, path: string, schema: z.ZodType<T>, trust: JoinTrust, body?: unknown): Promise<T> {
  const agent = agentFor(trust);
  let res: Response;
  try {
    try {
      res = await fetchOnce(`https://${addr}${path}`, method, body, agent);
    } catch (err) {
      if (!isLoopbackHost(splitHostPort(addr).host)) throw err;
      res = await fetchOnce(`http://${addr}${path}`, method, body, undefined);
    }
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    throw new UnreachableError(addr, e.name === 'TimeoutError' ? 'no answer in time' : e.cause?.code ?? e.cause?.message ?? e.message, e.name === 'TimeoutError');
  } finally {
    void agent.close();
  }
  if (!res.ok) throw await apiErrorFrom(res, addr);
  const parsed = schema.safeParse(await res.json().catch(() => undefined));
  if (!parsed.success) throw new CliFailure(`${addr} answered ${method} ${path} in an unexpected shape; is it a shoal node of this version?`, exitCodes.failed, 'bad_answer');
  return parsed.data;
}

const caAnswer = z.object({ clusterId: z.string(), caPem: z.string(), retiredFingerprints: z.array(z.string()).max(64).optional() }).loose();

/** The cluster's CA as `addr` shows it, refused with ca_mismatch unless it is the token's. Sends nothing secret. */
export async function fetchCheckedCa(addr: string, token: ParsedToken): Promise<{ clusterId: string; caPem: string }> {
  const ca = await joinRequest(addr, 'GET', '/v1/join/ca', caAnswer, { kind: 'none' });
  let fingerprint: string;
  try {
    fingerprint = fingerprintOf(ca.caPem);
  } catch (err) {
    throw new ShoalError('ca_mismatch', `${addr} showed a CA that is not a certificate (${(err as Error).message}); nothing was sent`, { addr });
  }
  if (fingerprint !== token.caFingerprint && ca.retiredFingerprints?.includes(token.caFingerprint) === true) {
    throw new ShoalError('ca_mismatch', `the token names a CA that ${addr} says was retired by a CA rotation (shoal ca rotate): the token was made before it. Nothing was sent; make a new token with shoal token create`, {
      addr, expected: token.caFingerprint, got: fingerprint, reason: 'ca_rotated',
    });
  }
  if (fingerprint !== token.caFingerprint) {
    throw new ShoalError('ca_mismatch', `the CA at ${addr} (SHA-256 ${fingerprint.slice(0, 16)}…) is not the one the token names (${token.caFingerprint.slice(0, 16)}…): another cluster's node, or someone in between. Nothing was sent and nothing written; check the address`, {
      addr, expected: token.caFingerprint, got: fingerprint,
    });
  }
  return { clusterId: ca.clusterId, caPem: ca.caPem };
}

export const joinAnswerSchema = z.object({
  clusterId: z.string(), caPem: z.string(), certPem: z.string(), role: z.enum(['voter', 'learner', 'client']), clientRole: z.string().optional(),
  members: z.array(z.object({ id: z.string(), name: z.string(), peerAddress: z.string(), apiAddress: z.string() })),
}).loose();
export type JoinAnswerBody = z.infer<typeof joinAnswerSchema>;
