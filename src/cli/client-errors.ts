// The ways a CLI call fails, as values: the API answered with an error body (ApiError), no
// answer came at all (UnreachableError, with why as far as the CLI can tell), or the command
// found the failure itself (CliFailure). failure-report.ts turns each into a message and an exit
// code; no-answer.ts tells apart the causes of "no answer".

import { z } from 'zod';

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
  /** The size of the request body sent, when there was one: a payload_too_large answer names it. */
  requestBytes?: number;
  constructor(readonly status: number, readonly body: ApiErrorBody, readonly addr: string, readonly retryAfterMs?: number) {
    super(body.message);
    this.name = 'ApiError';
    this.code = body.code;
  }
}

/** Why no answer came: what the message and the advice depend on. */
export type NoAnswerKind =
  /** Nothing listens at the address (ECONNREFUSED). */
  | 'refused'
  /** No answer within the request's time. */
  | 'timeout'
  /** The host name does not resolve. */
  | 'dns'
  /** No route to the host, or the network is down. */
  | 'network'
  /** The connection was closed or reset before an answer. */
  | 'closed'
  /** The TLS handshake failed for another reason than the CA (an expired certificate, a protocol mismatch). */
  | 'tls'
  | 'other';

const kindsByCode: Readonly<Record<string, NoAnswerKind>> = {
  ECONNREFUSED: 'refused', ENOTFOUND: 'dns', EAI_AGAIN: 'dns', EHOSTUNREACH: 'network', ENETUNREACH: 'network', EHOSTDOWN: 'network',
  ECONNRESET: 'closed', EPIPE: 'closed', ECONNABORTED: 'closed', UND_ERR_SOCKET: 'closed', UND_ERR_CLOSED: 'closed',
  UND_ERR_CONNECT_TIMEOUT: 'timeout', ETIMEDOUT: 'timeout',
};

/** The kind of a low-level error code (ECONNREFUSED, EPIPE, UND_ERR_SOCKET, CERT_HAS_EXPIRED, ...). */
export function noAnswerKindOf(code: string | undefined): NoAnswerKind {
  if (code === undefined) return 'other';
  const kind = kindsByCode[code];
  if (kind !== undefined) return kind;
  return /^(ERR_SSL|ERR_TLS|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED)/.test(code) ? 'tls' : 'other';
}

/** No answer: connection refused, reset, DNS failure, or no answer in time. */
export class UnreachableError extends Error {
  readonly kind: NoAnswerKind;
  constructor(readonly addr: string, readonly reason: string, readonly timedOut: boolean, kind?: NoAnswerKind) {
    super(`cannot reach ${addr}: ${reason}`);
    this.name = 'UnreachableError';
    this.kind = kind ?? (timedOut ? 'timeout' : noAnswerKindOf(/^[A-Z][A-Z0-9_]+/.exec(reason)?.[0]));
  }
}

/** What a CliFailure may carry besides its message: the advice, and fields for --json. */
export interface FailureExtra {
  hint?: string;
  details?: Record<string, unknown>;
}

/** A failure the command detected itself, with the exit code it means and what to do next. */
export class CliFailure extends Error {
  constructor(message: string, readonly exitCode: number, readonly code = 'failed', readonly extra: FailureExtra = {}) {
    super(message);
    this.name = 'CliFailure';
  }
}

export type ClientFailure = ApiError | UnreachableError | CliFailure;

export function isClientFailure(err: unknown): err is ClientFailure {
  return err instanceof ApiError || err instanceof UnreachableError || err instanceof CliFailure;
}

/** Reads an error answer; a body that is not a catalog error still yields a useful message. */
export function apiErrorOf(status: number, text: string, statusText: string, retryAfter: string | null, addr: string): ApiError {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    raw = undefined;
  }
  const parsed = errorBodySchema.safeParse(raw);
  const body: ApiErrorBody = parsed.success ? parsed.data : { code: `http_${status}`, message: `HTTP ${status}: ${text.slice(0, 300) || statusText}` };
  const retryAfterS = Number(retryAfter ?? Number.NaN);
  return new ApiError(status, body, addr, Number.isFinite(retryAfterS) ? retryAfterS * 1000 : undefined);
}

/** Reads an error answer of fetch(). */
export async function apiErrorFrom(res: Response, addr: string): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  return apiErrorOf(res.status, text, res.statusText, res.headers.get('retry-after'), addr);
}
