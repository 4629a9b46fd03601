// One HTTP call to a node's API with a deadline, for the fault tests' clients and nemesis. A
// transport failure (refused, reset, timed out) is returned, not thrown, because the callers
// must tell "the node answered no" from "we do not know what happened".

import { Agent } from 'undici';
import { checkNodeServerIdentity } from '../../src/security/tls-identity.ts';

export interface HttpAnswer {
  kind: 'answer';
  status: number;
  /** The parsed JSON body, or undefined when it was not JSON. */
  body: unknown;
  /** `code` of an error body, when there is one. */
  code: string | undefined;
}

export interface HttpFailure {
  kind: 'failure';
  /** 'timeout' when our deadline passed; else the socket error's code (ECONNREFUSED, ...). */
  error: string;
}

export type HttpResult = HttpAnswer | HttpFailure;

export interface HttpRequest {
  method?: 'GET' | 'PUT' | 'POST' | 'DELETE';
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs: number;
}

let tlsDispatcher: Agent | undefined;

/**
 * From now on every call is HTTPS with this client certificate, trusting only the cluster CA, as
 * any client of a node must (the nodes run in network namespaces: no insecure loopback API).
 */
export function useClientCertificate(c: { caPem: string; certPem: string; keyPem: string }): void {
  void tlsDispatcher?.close();
  tlsDispatcher = new Agent({ connect: { ca: c.caPem, cert: c.certPem, key: c.keyPem, checkServerIdentity: checkNodeServerIdentity } });
}

export async function call(apiAddress: string, path: string, req: HttpRequest): Promise<HttpResult> {
  const headers: Record<string, string> = { ...req.headers };
  if (req.body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  let text: string;
  try {
    res = await fetch(`${tlsDispatcher === undefined ? 'http' : 'https'}://${apiAddress}${path}`, {
      method: req.method ?? 'GET', headers, signal: AbortSignal.timeout(req.timeoutMs),
      ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
      ...(tlsDispatcher !== undefined ? { dispatcher: tlsDispatcher } : {}),
    } as RequestInit);
    text = await res.text();
  } catch (err) {
    return { kind: 'failure', error: transportError(err) };
  }
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  const code = typeof body === 'object' && body !== null && 'code' in body && typeof body.code === 'string' ? body.code : undefined;
  return { kind: 'answer', status: res.status, body, code };
}

function transportError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err.name === 'TimeoutError' || err.name === 'AbortError') return 'timeout';
  const cause = (err as Error & { cause?: unknown }).cause;
  if (typeof cause === 'object' && cause !== null && 'code' in cause && typeof cause.code === 'string') return cause.code;
  return err.message;
}

/** `doc.value` of a document answer, if it is a string. */
export function docValue(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || !('doc' in body)) return undefined;
  const doc = body.doc;
  if (typeof doc !== 'object' || doc === null || !('value' in doc)) return undefined;
  return typeof doc.value === 'string' ? doc.value : undefined;
}

/** `rev` of a document answer. */
export function docRev(body: unknown): number | undefined {
  if (typeof body !== 'object' || body === null || !('rev' in body)) return undefined;
  return typeof body.rev === 'number' ? body.rev : undefined;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
