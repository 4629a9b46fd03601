// The one function a node uses to call another member's API about its own certificate (the CA
// key for a new voter, renewal). It is the single place that knows the transport of such calls.

import type { z } from 'zod';
import { loadUndici } from '../base/load-undici.ts';
import { checkNodeServerIdentity } from './tls-identity.ts';

/**
 * How to reach the other members' APIs: HTTPS pinned to the cluster CA (no client certificate:
 * these routes are public and the node proves itself in the body, which works even when its
 * own certificate has expired), or plain HTTP for a cluster on api.insecureLoopback.
 */
export interface NodeLink {
  scheme: 'http' | 'https';
  caPem: string;
}

export const nodeCallTimeoutMs = 10_000;

/** POSTs `body` to addr + path; resolves with the parsed answer, rejects with a message. */
export async function nodeCall<T>(addr: string, path: string, body: unknown, schema: z.ZodType<T>, link: NodeLink): Promise<T> {
  // undici is loaded by the first such call, not at start (issue 45).
  const agent = link.scheme === 'https' ? new (await loadUndici()).Agent({ connect: { ca: link.caPem, minVersion: 'TLSv1.3', checkServerIdentity: checkNodeServerIdentity } }) : undefined;
  let res: Response;
  try {
    res = await fetch(`${link.scheme}://${addr}${path}`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(nodeCallTimeoutMs),
      ...(agent !== undefined ? { dispatcher: agent } : {}),
    } as RequestInit);
  } finally {
    void agent?.close();
  }
  const raw: unknown = await res.json().catch(() => undefined);
  if (!res.ok) {
    const e = raw as { code?: string; message?: string } | undefined;
    throw new Error(`${addr} answered ${res.status}${e?.code !== undefined ? ` ${e.code}: ${e.message ?? ''}` : ''}`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new Error(`${addr} answered ${path} in an unexpected shape`);
  return parsed.data;
}

/** Member API addresses to ask, the leader first: it is the most likely to hold the CA key. */
export function addressesLeaderFirst(members: ReadonlyArray<{ id: string; apiAddress: string }>, leader: string, self: string): string[] {
  return [...members].filter((m) => m.id !== self).sort((a, b) => Number(b.id === leader) - Number(a.id === leader)).map((m) => m.apiAddress);
}
