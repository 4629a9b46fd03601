// The calls `shoal join` and `shoal login` make before the machine trusts the cluster: they
// fetch the CA (trusting nothing yet), check it against the token's fingerprint, and only then
// send the token and the certificate request, trusting that CA alone. Both go through
// `joinRequest`, the one place that knows how to reach a node that is not trusted yet.

import { z } from 'zod';
import { ShoalError } from '../errors.ts';
import { fingerprintOf } from '../security/authority.ts';
import type { ParsedToken } from '../security/tokens.ts';
import { request } from './client.ts';

/** Whom to trust: nothing (the CA fetch, checked by fingerprint afterwards) or the checked CA. */
export type JoinTrust = { kind: 'none' } | { kind: 'ca'; caPem: string };

/**
 * One JSON call to a node for a join. Until the API speaks TLS everywhere this is plain HTTP;
 * the fingerprint check below holds either way, and the CSR carries no secret.
 */
export async function joinRequest<T>(addr: string, method: string, path: string, schema: z.ZodType<T>, _trust: JoinTrust, body?: unknown): Promise<T> {
  const res = await request(addr, method, path, schema, { ...(body !== undefined ? { body } : {}), retry: 'not-applied', timeoutMs: 30_000 });
  return res.body;
}

const caAnswer = z.object({ clusterId: z.string(), caPem: z.string() }).loose();

/** The cluster's CA as `addr` shows it, refused with ca_mismatch unless it is the token's. Sends nothing secret. */
export async function fetchCheckedCa(addr: string, token: ParsedToken): Promise<{ clusterId: string; caPem: string }> {
  const ca = await joinRequest(addr, 'GET', '/v1/join/ca', caAnswer, { kind: 'none' });
  let fingerprint: string;
  try {
    fingerprint = fingerprintOf(ca.caPem);
  } catch (err) {
    throw new ShoalError('ca_mismatch', `${addr} showed a CA that is not a certificate (${(err as Error).message}); nothing was sent`, { addr });
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
