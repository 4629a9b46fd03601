// The HTTP client the CLI commands share: one request function that turns every way a call can
// fail into one of two typed errors (the API answered with an error body, or no answer at all),
// and one place that maps those to exit codes and prints what happened and what to do next.

import { z } from 'zod';
import { hostPortProblem } from '../base/host-port.ts';
import { exitCodes, UsageError } from './args.ts';
import { activeCredential } from './credential-file.ts';

export const defaultAddr = '127.0.0.1:7101';
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

const errorBodySchema = z.object({
  code: z.string(),
  message: z.string(),
  requestId: z.string().optional(),
  retryable: z.boolean().optional(),
  details: z.record(z.string(), z.unknown()).optional(),
}).loose();
export type ApiErrorBody = z.infer<typeof errorBodySchema>;

/** The API answered with an error body (docs/errors.md). */
export class ApiError extends Error {
  readonly code: string;
  constructor(readonly status: number, readonly body: ApiErrorBody, readonly addr: string, readonly retryAfterMs?: number) {
    super(body.message);
    this.name = 'ApiError';
    this.code = body.code;
  }
}

/** No answer: connection refused, reset, DNS failure, or no answer in time. */
export class UnreachableError extends Error {
  constructor(readonly addr: string, readonly reason: string, readonly timedOut: boolean) {
    super(`cannot reach ${addr}: ${reason}`);
    this.name = 'UnreachableError';
  }
}

/** A failure the command detected itself, with the exit code it means and what to do next. */
export class CliFailure extends Error {
  constructor(message: string, readonly exitCode: number, readonly code = 'failed') {
    super(message);
    this.name = 'CliFailure';
  }
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

function reasonOf(err: unknown): { reason: string; timedOut: boolean } {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return { reason: 'no answer in time', timedOut: true };
  const cause = e?.cause;
  if (cause?.code !== undefined) return { reason: `${cause.code}${cause.message && !cause.message.includes(cause.code) ? ` (${cause.message})` : ''}`, timedOut: false };
  return { reason: cause?.message ?? e?.message ?? String(err), timedOut: false };
}

/** fetch, with every failure to get an answer turned into UnreachableError. */
export async function send(addr: string, path: string, init: RequestInit & { query?: RequestOptions['query'] }): Promise<Response> {
  const token = activeCredential()?.token;
  const withToken = token === undefined ? init : { ...init, headers: { ...(init.headers as Record<string, string> | undefined), authorization: `Bearer ${token}` } };
  try {
    return await fetch(url(addr, path, init.query), withToken);
  } catch (err) {
    if ((err as Error)?.name === 'AbortError' && init.signal?.aborted && init.signal.reason?.name !== 'TimeoutError') throw err;
    const { reason, timedOut } = reasonOf(err);
    throw new UnreachableError(addr, reason, timedOut);
  }
}

/** Reads an error answer; a body that is not a catalog error still yields a useful message. */
export async function apiErrorFrom(res: Response, addr: string): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    raw = undefined;
  }
  const parsed = errorBodySchema.safeParse(raw);
  const body: ApiErrorBody = parsed.success ? parsed.data : { code: `http_${res.status}`, message: `HTTP ${res.status}: ${text.slice(0, 300) || res.statusText}` };
  const retryAfterS = Number(res.headers.get('retry-after') ?? Number.NaN);
  return new ApiError(res.status, body, addr, Number.isFinite(retryAfterS) ? retryAfterS * 1000 : undefined);
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
      const delayMs = Math.min(retryDelayMsMax, err.retryAfterMs ?? 250 * 2 ** attempt);
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
  const res = await send(addr, path, {
    method, headers, body, query: opts.query, signal: AbortSignal.timeout(opts.timeoutMs ?? requestTimeoutMsDefault),
  });
  if (!res.ok) throw await apiErrorFrom(res, addr);
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

// ---- failures: exit codes and messages ----------------------------------------------------

export type ClientFailure = ApiError | UnreachableError | CliFailure;

export function isClientFailure(err: unknown): err is ClientFailure {
  return err instanceof ApiError || err instanceof UnreachableError || err instanceof CliFailure;
}

/**
 * 404, 409, 410, 412 and the API's 400 are failures of the request (1); 503, 504 and no answer mean
 * the cluster cannot serve right now (3). Exit 2 is kept for mistakes in the command line itself,
 * which are caught before any request is sent.
 */
export function exitCodeOf(err: ClientFailure): number {
  if (err instanceof CliFailure) return err.exitCode;
  if (err instanceof UnreachableError) return exitCodes.unavailable;
  return err.status === 503 || err.status === 504 ? exitCodes.unavailable : exitCodes.failed;
}

/** What the caller knows that makes advice sharper: the write's idempotency key, the collection. */
export interface FailureContext {
  idempotencyKey?: string;
  /** The command line that retries this write safely, when the outcome is unknown. */
  retryCommand?: string;
  collection?: string;
  /** The write was --if-absent (a failed precondition then means the document exists). */
  ifAbsent?: boolean;
}

function problemsOf(details: Record<string, unknown> | undefined): string[] {
  const list = details?.problems ?? details?.issues;
  if (!Array.isArray(list)) return [];
  return list.map((p) => {
    const o = p as { path?: unknown; message?: unknown };
    const where = Array.isArray(o.path) ? o.path.join('.') : String(o.path ?? '');
    return `${where || '(body)'}: ${String(o.message ?? JSON.stringify(p))}`;
  });
}

/** The advice after a failed conditional write: what the document's revision is now. */
function conditionHint(currentRev: unknown, ifAbsent: boolean): string {
  if (currentRev === null || currentRev === undefined) return 'the document does not exist (any more); drop --if-match to create it, or use --if-absent';
  const rev = String(currentRev);
  return ifAbsent
    ? `it exists at rev ${rev}; replace it with --if-match ${rev}`
    : `the document changed since you read it: it is at rev ${rev}; read it again and retry with --if-match ${rev}`;
}

function memberHint(d: Record<string, unknown>): string | undefined {
  const force = ', or add --force to do it anyway';
  switch (d.reason) {
    case 'unreachable':
      return `start the node first ('shoal serve' with 'join: {api: <a member's API>}' in its config) and check --api${force}`;
    case 'cluster_mismatch':
      return `that node belongs to another cluster: initialize it with 'shoal init --ca-from <a member's data dir>' of this cluster${force}`;
    case 'id_mismatch':
      return `check --id against the id 'shoal init' printed for that node (in its node.json)${force}`;
    case 'lagging':
    case 'inactive':
      return `wait until it has caught up (LAG near 0 in 'shoal cluster status')${force}`;
    default:
      return undefined;
  }
}

function hintOf(err: ApiError, ctx: FailureContext): string | undefined {
  const d = err.body.details ?? {};
  const unknownOutcome = ctx.retryCommand !== undefined
    ? `the write may or may not have been applied; retry it safely (same idempotency key): ${ctx.retryCommand}`
    : undefined;
  switch (err.code) {
    case 'revision_mismatch':
      return conditionHint(d.currentRev, false);
    case 'already_exists':
      if (d.member !== undefined) return "names and ids are unique in a cluster: see 'shoal cluster members'";
      return d.currentRev !== undefined ? conditionHint(d.currentRev, true) : undefined;
    case 'precondition_failed':
      return conditionHint(d.currentRev, ctx.ifAbsent === true || d.precondition === 'If-None-Match');
    case 'ambiguous_name': {
      const candidates = Array.isArray(d.candidates) ? (d.candidates as { id?: unknown }[]).map((c) => String(c.id)) : [];
      return `use the id instead: ${candidates.join(' or ')}`;
    }
    case 'member_not_ready':
      return memberHint(d);
    case 'idempotency_conflict':
      return 'this idempotency key was used for a different request; use a new --idempotency-key';
    case 'cursor_expired':
      return `events older than rev ${String(d.oldestRev ?? '?')} are no longer kept; list again and watch from the listing's rev: shoal doc ls ${ctx.collection ?? 'COLLECTION'} --watch`;
    case 'timeout':
    case 'leader_changed':
      return unknownOutcome ?? 'retry; check the cluster with: shoal cluster status';
    case 'unauthenticated':
      return "the CLI found no credential it may use: pass --credential FILE, or set $SHOAL_CONFIG to a directory with credential.json (shoal dev and shoal init write one; docs/security.md)";
    case 'forbidden':
      return d.reason === 'forged_principal' ? 'drop the X-Shoal-Principal header: the principal is the one your credential names' : `ask an admin for a credential with role ${String(d.needed ?? 'admin')} (shoal credential create)`;
    case 'no_leader':
    case 'proposal_dropped':
    case 'stopping':
      return `nothing was changed; retry in a moment, or ask another node with --addr; check the cluster with: shoal cluster status --addr ${err.addr}`;
    default:
      return undefined;
  }
}

/** Prints the failure on stderr (one JSON object with --json) and returns its exit code. */
export function reportFailure(command: string, err: ClientFailure, json: boolean, ctx: FailureContext = {}): number {
  const code = exitCodeOf(err);
  if (err instanceof CliFailure) {
    if (json) console.error(JSON.stringify({ error: { code: err.code, message: err.message }, exitCode: code }));
    else console.error(`shoal ${command}: ${err.message}`);
    return code;
  }
  if (err instanceof UnreachableError) {
    const hint = err.timedOut && ctx.retryCommand !== undefined
      ? `the write may or may not have been applied; retry it safely (same idempotency key): ${ctx.retryCommand}`
      : activeCredential() === null
        ? `is a node running there? Pick another node with --addr HOST:PORT or $SHOAL_ADDR; start one with 'shoal serve' or 'shoal dev'. A node that serves HTTPS needs a credential: --credential FILE, $SHOAL_CONFIG or ~/.config/shoal/credential.json`
        : `is a node running there? Pick another node with --addr HOST:PORT or $SHOAL_ADDR; start one with 'shoal serve' or 'shoal dev'. A TLS failure means the node is not of the cluster whose CA the credential pins`;
    if (json) console.error(JSON.stringify({ error: { code: 'unreachable', message: err.message, addr: err.addr, hint }, exitCode: code }));
    else console.error(`shoal ${command}: ${err.message}\n  ${hint}`);
    return code;
  }
  const hint = hintOf(err, ctx);
  if (json) {
    console.error(JSON.stringify({ error: { ...err.body, status: err.status, addr: err.addr, ...(hint !== undefined ? { hint } : {}) }, exitCode: code }));
    return code;
  }
  const problems = problemsOf(err.body.details);
  // The message repeats the problems after its first colon; list them one per line instead.
  const summary = problems.length > 0 && err.message.includes(':') ? `${err.message.slice(0, err.message.indexOf(':'))}:` : err.message;
  const lines = [`shoal ${command}: ${err.code}: ${summary}`];
  for (const p of problems) lines.push(`  - ${p}`);
  if (hint !== undefined) lines.push(`  ${hint}`);
  if (err.body.requestId !== undefined && err.status >= 500 && err.status !== 503 && err.status !== 504) lines.push(`  request id ${err.body.requestId} (the node log has details)`);
  console.error(lines.join('\n'));
  return code;
}
