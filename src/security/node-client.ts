// The one function a node uses to call another member's API about its own certificate (the CA
// key for a new voter, renewal). It is the single place that knows the transport of such calls.

import type { z } from 'zod';
import type { Tls } from '../node/identity.ts';

export const nodeCallTimeoutMs = 10_000;

/** POSTs `body` to http(s)://addr + path; resolves with the parsed answer, rejects with a message. */
export async function nodeCall<T>(addr: string, path: string, body: unknown, schema: z.ZodType<T>, _tls: Tls): Promise<T> {
  const res = await fetch(`http://${addr}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(nodeCallTimeoutMs),
  });
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
