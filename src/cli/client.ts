// The HTTP client the CLI commands share: one request function that turns every way a call can
// fail into a typed error (client-errors.ts): the API answered with an error body, or no answer
// came, told apart by cause (no-answer.ts). failure-report.ts maps those to exit codes and prints
// what happened and what to do next.

import type { z } from 'zod';
import { hostPortProblem } from '../base/host-port.ts';
import { exitCodes, UsageError } from './args.ts';
import { ApiError, apiErrorFrom, CliFailure } from './client-errors.ts';
import { activeCredential, credentialDispatcherReady } from './credential-file.ts';
import { defaultAddr } from './failure-report.ts';
import { explainNoAnswer } from './no-answer.ts';
import { backoffDelayMs } from '../base/backoff.ts';

export { ApiError, apiErrorFrom, CliFailure, isClientFailure, UnreachableError, type ApiErrorBody, type ClientFailure } from './client-errors.ts';
export { defaultAddr, exitCodeOf, reportFailure, type FailureContext } from './failure-report.ts';

/** A call that has not answered in this long is abandoned (exit 3). */
export const requestTimeoutMsDefault = 15_000;
/** Attempts for a request that may be retried, the first included. */
const attemptsMax = 4;
const retryDelayMsMax = 2_000;

/** The node to talk to: --addr, else $SHOAL_ADDR, else the credential's first address, else 127.0.0.1:7101. */
export function resolveAddr(flag: string | undefined): string {
  const addr = flag ?? (process.env.SHOAL_ADDR || undefined) ?? activeCredential()?.addresses[0] ?? defaultAddr;
  const problem = hostPortProblem(addr);
  if (problem !== undefined) throw new UsageError(`${flag !== undefined ? '--addr' : '$SHOAL_ADDR'} must be HOST:PORT (e.g. 127.0.0.1:7101): ${problem}, got '${addr}'`);
  return addr;
}

export function checkHostPort(value: string, flag: string): string {
  const problem = hostPortProblem(value);
  if (problem !== undefined) throw new UsageError(`${flag}: ${problem}, got '${value}'`);
  return value;
}

export type RetryPolicy =
  /** Never retry. */
  | 'none'
  /** Retry only answers that say the request was not carried out (no leader, proposal dropped). */
  | 'not-applied'
  /** Retry every retryable answer: reads, and writes carrying an idempotency key. */
  | 'safe';

export interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
  query?: Record<string, string | number | undefined>;
  timeoutMs?: number;
  retry?: RetryPolicy;
  /** Told about each retry (to print progress). */
  onRetry?: (err: ApiError, delayMs: number, attempt: number) => void;
}

export interface Answer<T> {
  status: number;
  headers: Headers;
  body: T;
}

export function url(addr: string, path: string, query: Record<string, string | number | undefined> = {}): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, String(v));
  const s = qs.toString();
  // With a credential the API is HTTPS (the CA pinned); without one only an insecure-loopback API answers.
  const scheme = activeCredential() === null ? 'http' : 'https';
  return `${scheme}://${addr}${path}${s === '' ? '' : `?${s}`}`;
}

/** The size of a request body as sent, for the too-large probe and message. */
function bodyBytesOf(body: RequestInit['body']): number {
  if (typeof body === 'string') return Buffer.byteLength(body);
  if (body instanceof Blob) return body.size;
  if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) return body.byteLength;
  return 0;
}

function headersOf(init: RequestInit): Record<string, string> {
  return Object.fromEntries(new Headers(init.headers).entries());
}

/**
 * fetch, with every failure to get an answer turned into what it was (no-answer.ts): a body
 * over the node's limit (ApiError payload_too_large), a node of another CA (ca_mismatch), an
 * HTTPS node called without a credential (unauthenticated), or no answer (UnreachableError).
 */
export async function send(addr: string, path: string, init: RequestInit & { query?: RequestOptions['query']; timeoutMs?: number }): Promise<Response> {
  const token = activeCredential()?.token;
  const withToken = token === undefined ? init : { ...init, headers: { ...headersOf(init), authorization: `Bearer ${token}` } };
  const target = url(addr, path, init.query);
  await credentialDispatcherReady();
  try {
    return await fetch(target, withToken);
  } catch (err) {
    if ((err as Error)?.name === 'AbortError' && init.signal?.aborted && init.signal.reason?.name !== 'TimeoutError') throw err;
    const { pathname, search } = new URL(target);
    throw await explainNoAnswer(addr, {
      method: init.method ?? 'GET', target: `${pathname}${search}`, headers: headersOf(init), bodyBytes: bodyBytesOf(init.body), ...(init.timeoutMs !== undefined ? { timeoutMs: init.timeoutMs } : {}),
    }, err);
  }
}

function retryable(err: ApiError, policy: RetryPolicy): boolean {
  if (policy === 'none' || err.status < 500) return false;
  if (policy === 'not-applied') return err.code === 'no_leader' || err.code === 'proposal_dropped';
  return err.body.retryable === true;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One API call with a JSON answer, validated by `schema`. Retries per `opts.retry`. */
export async function request<T>(addr: string, method: string, path: string, schema: z.ZodType<T>, opts: RequestOptions = {}): Promise<Answer<T>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await requestOnce(addr, method, path, schema, opts);
    } catch (err) {
      if (!(err instanceof ApiError) || attempt >= attemptsMax || !retryable(err, opts.retry ?? 'none')) throw err;
      const delayMs = Math.min(retryDelayMsMax, err.retryAfterMs ?? backoffDelayMs(attempt + 1, 250, retryDelayMsMax));
      opts.onRetry?.(err, delayMs, attempt + 1);
      await sleep(delayMs);
    }
  }
}

async function requestOnce<T>(addr: string, method: string, path: string, schema: z.ZodType<T>, opts: RequestOptions): Promise<Answer<T>> {
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const timeoutMs = opts.timeoutMs ?? requestTimeoutMsDefault;
  let res: Response;
  try {
    res = await send(addr, path, { method, headers, body, query: opts.query, signal: AbortSignal.timeout(timeoutMs), timeoutMs });
  } catch (err) {
    if (err instanceof ApiError && body !== undefined) err.requestBytes ??= Buffer.byteLength(body);
    throw err;
  }
  if (!res.ok) {
    const err = await apiErrorFrom(res, addr);
    if (body !== undefined) err.requestBytes = Buffer.byteLength(body);
    throw err;
  }
  let raw: unknown;
  try {
    raw = await res.json();
  } catch (err) {
    throw new CliFailure(`${addr} answered ${method} ${path} with something that is not JSON (${(err as Error).message}); is it a shoal node?`, exitCodes.failed, 'bad_answer');
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new CliFailure(`${addr} answered ${method} ${path} in an unexpected shape (${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}); is the node running a different shoal version?`, exitCodes.failed, 'bad_answer');
  }
  return { status: res.status, headers: res.headers, body: parsed.data };
}

/** Prints a retry notice on stderr: long operations show progress. */
export function retryNotice(command: string): RequestOptions['onRetry'] {
  return (err, delayMs, attempt) => {
    console.error(`shoal ${command}: ${err.code}: ${err.message}; retrying in ${(delayMs / 1000).toFixed(1)} s (attempt ${attempt} of ${attemptsMax})`);
  };
}

