// The one catalog of error codes. Every error a client or operator can see has a code here, with
// its HTTP status and whether retrying the same request may succeed. docs/errors.md lists the
// same codes; a test checks that the two agree both ways. Codes are never reused.

export const errorCatalog = {
  bad_request: { status: 400, retryable: false, summary: 'The request is malformed or has invalid fields; details lists every problem.' },
  not_found: { status: 404, retryable: false, summary: 'No such resource.' },
  unsupported_media_type: { status: 415, retryable: false, summary: 'The body is not sent as application/json.' },
  payload_too_large: { status: 413, retryable: false, summary: 'The request body exceeds the limit.' },
  no_leader: { status: 503, retryable: true, summary: 'The cluster has no leader right now (election in progress or quorum lost).' },
  proposal_dropped: { status: 503, retryable: true, summary: 'The leader refused the write (leadership transfer in progress, too many uncommitted writes).' },
  leader_changed: { status: 503, retryable: true, summary: 'Leadership changed while the request was in flight; the outcome is unknown for writes.' },
  timeout: { status: 504, retryable: true, summary: 'The request did not complete in time; for a write the outcome is unknown.' },
  stopping: { status: 503, retryable: true, summary: 'The node is shutting down.' },
  config_invalid: { status: 400, retryable: false, summary: 'A configuration file or flag is invalid.' },
  storage_format: { status: 500, retryable: false, summary: 'The data directory was written in a storage format this version does not know.' },
  storage_corrupt: { status: 500, retryable: false, summary: 'The node found damaged data in its data directory and refused to start.' },
  revision_mismatch: { status: 409, retryable: false, summary: 'The document is not at the expected revision (If-Match or a txn op\'s expected rev); details has the current rev, or null when absent.' },
  already_exists: { status: 409, retryable: false, summary: 'The document exists but the write required it to be absent (If-None-Match: *); details has its current rev.' },
  cursor_expired: { status: 410, retryable: false, summary: 'The watch cursor is older than the retained events; details.oldestRev is the oldest revision still complete. List again and watch from the list revision.' },
  idempotency_conflict: { status: 409, retryable: false, summary: 'The idempotency key was already used by the same principal for a different request.' },
  internal: { status: 500, retryable: false, summary: 'An unexpected error; it is a bug. The log has details.' },
} as const satisfies Record<string, { status: number; retryable: boolean; summary: string }>;

export type ErrorCode = keyof typeof errorCatalog;

/** An operating error with a catalog code. `details` carries structured specifics. */
export class ShoalError extends Error {
  readonly status: number;
  readonly retryable: boolean;

  constructor(readonly code: ErrorCode, message: string, readonly details?: Record<string, unknown>) {
    super(message);
    this.name = 'ShoalError';
    this.status = errorCatalog[code].status;
    this.retryable = errorCatalog[code].retryable;
  }
}

export function isShoalError(err: unknown): err is ShoalError {
  return err instanceof ShoalError;
}
