// How a failed client call reaches the user: the exit code it means, and one message (or one
// JSON object under --json) saying what happened and what to do next, sharpened by what the
// caller knows (FailureContext) and by the credential in use.

import { exitCodes } from './args.ts';
import { ApiError, CliFailure, UnreachableError, type ClientFailure } from './client-errors.ts';
import { activeCredential, activeCredentialFound, foundLabel } from './credential-file.ts';
import { noCredentialHint } from './no-answer.ts';

/** The address the CLI talks to without --addr, $SHOAL_ADDR or a credential: shoal dev's first node. */
export const defaultAddr = '127.0.0.1:7101';

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

/** "FILE (context home, the current one in $SHOAL_CONFIG): alice, admin", or undefined without a credential. */
function credentialInUse(): string | undefined {
  try {
    const credential = activeCredential();
    if (credential === null) return undefined;
    const found = activeCredentialFound();
    return `${found !== undefined ? `${found.file} (${foundLabel(found)})` : 'held in memory'}: ${credential.principal}, ${credential.role}`;
  } catch {
    return undefined;
  }
}

/** What to do about a credential the API refused, by `details.reason` (src/api/auth.ts). */
const refusedAdvice: Readonly<Record<string, string>> = {
  token: 'its bearer token is unknown to this cluster, revoked, or mistyped: ask an admin for a new one (shoal credential create --out FILE)',
  token_expired: 'ask an admin for a new token (shoal credential create --out FILE)',
  certificate: "its client certificate is not one this cluster accepts (another cluster's, or expired): use the right one (shoal context ls) or sign in again (shoal login)",
  untrusted_ca: 'its certificate is of a CA this cluster retired (shoal ca rotate): sign in again (shoal login; on a member, shoal login --local)',
  revoked: 'its certificate was revoked (shoal cert revoked lists the serials): sign in again, or ask an admin',
};

function unauthenticatedHint(err: ApiError): string {
  const using = credentialInUse();
  if (using === undefined) return noCredentialHint(err.addr);
  const advice = refusedAdvice[String(err.body.details?.reason ?? '')];
  return `the node refused the credential ${using}${advice !== undefined ? `; ${advice}` : ''}`;
}

/** The size sent, the limit, and the two ways out: a smaller request, or a higher limit. */
function tooLargeHint(err: ApiError): string {
  const d = err.body.details ?? {};
  const limit = typeof d.limit === 'string' ? d.limit : 'bodyBytesMax';
  const max = typeof d.max === 'number' ? `${d.max} bytes` : undefined;
  const sent = err.requestBytes !== undefined ? `the body sent was ${err.requestBytes} bytes` : 'the body sent was';
  if (limit !== 'bodyBytesMax') return `${sent}, over ${limit}${max !== undefined ? ` (${max})` : ''}`;
  return `${sent}, over ${err.addr}'s limits.bodyBytesMax (${max ?? '1048576 bytes (1 MiB) unless its config raises it'}). Split it: fewer documents or specs per request `
    + "(apply several smaller files); or raise limits.bodyBytesMax in every node's config and restart the nodes one at a time";
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
      return unauthenticatedHint(err);
    case 'payload_too_large':
      return tooLargeHint(err);
    case 'forbidden': {
      if (d.reason === 'forged_principal') return 'drop the X-Shoal-Principal header: the principal is the one your credential names';
      const using = credentialInUse();
      return `ask an admin for a credential with role ${String(d.needed ?? 'admin')} (shoal credential create)${using !== undefined ? `; this one is ${using}` : ''}`;
    }
    case 'no_leader':
    case 'proposal_dropped':
    case 'stopping':
      return `nothing was changed; retry in a moment, or ask another node with --addr; check the cluster with: shoal cluster status --addr ${err.addr}`;
    default:
      return undefined;
  }
}

/** What to do when no answer came, by why (client-errors.ts NoAnswerKind). */
function unreachableHint(err: UnreachableError, ctx: FailureContext): string {
  if (err.timedOut && ctx.retryCommand !== undefined) return `the write may or may not have been applied; retry it safely (same idempotency key): ${ctx.retryCommand}`;
  const other = 'or ask another node with --addr HOST:PORT ($SHOAL_ADDR)';
  switch (err.kind) {
    case 'refused': {
      const start = `is a node running there? Start it (its systemd unit, shoal serve --config DATA/shoal.yaml, or shoal dev), ${other}`;
      return credentialInUse() !== undefined ? start
        : `${start}. No credential was found, so the CLI tried ${err.addr}${err.addr === defaultAddr ? " (shoal dev's first node)" : ''}: a node made by shoal init or shoal join listens on 7100 and serves HTTPS, which takes a credential; ${noCredentialHint(err.addr)}`;
    }
    case 'timeout':
      return `the node is down, overloaded or cut off, or a firewall drops the packets: retry, ${other}`;
    case 'dns':
      return "check the host name (--addr, $SHOAL_ADDR, or the credential's addresses)";
    case 'network':
      return `the network to the node is down or the address is wrong: check it, ${other}`;
    case 'closed':
      return `is it a node's client API (not its peer port), and is the node stopping? Retry, ${other}`;
    case 'tls':
      return "the node's TLS is not what this CLI accepts (TLS 1.3, a node certificate of the cluster CA, valid now): check its clock and its certificate (shoal doctor)";
    default:
      return `retry, ${other}`;
  }
}

/** Prints the failure on stderr (one JSON object with --json) and returns its exit code. */
export function reportFailure(command: string, err: ClientFailure, json: boolean, ctx: FailureContext = {}): number {
  const code = exitCodeOf(err);
  if (err instanceof CliFailure) {
    const { hint, details } = err.extra;
    if (json) console.error(JSON.stringify({ error: { code: err.code, message: err.message, ...details, ...(hint !== undefined ? { hint } : {}) }, exitCode: code }));
    else console.error(`shoal ${command}: ${err.message}${hint !== undefined ? `\n  ${hint}` : ''}`);
    return code;
  }
  if (err instanceof UnreachableError) {
    const hint = unreachableHint(err, ctx);
    if (json) console.error(JSON.stringify({ error: { code: 'unreachable', message: err.message, addr: err.addr, kind: err.kind, hint }, exitCode: code }));
    else console.error(`shoal ${command}: ${err.message}\n  ${hint}`);
    return code;
  }
  const hint = hintOf(err, ctx);
  if (json) {
    console.error(JSON.stringify({ error: { ...err.body, status: err.status, addr: err.addr, ...(err.requestBytes !== undefined ? { requestBytes: err.requestBytes } : {}), ...(hint !== undefined ? { hint } : {}) }, exitCode: code }));
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
