// The one catalog of error codes. Every error a client or operator can see has a code here, with
// its HTTP status and whether retrying the same request may succeed. docs/errors.md lists the
// same codes; a test checks that the two agree both ways. Codes are never reused.

export const errorCatalog = {
  bad_request: { status: 400, retryable: false, summary: 'The request is malformed or has invalid fields; details lists every problem.' },
  not_found: { status: 404, retryable: false, summary: 'No such resource.' },
  unsupported_media_type: { status: 415, retryable: false, summary: 'The body is not sent as application/json.' },
  payload_too_large: { status: 413, retryable: false, summary: 'The request body exceeds the limit (details.limit, details.max in bytes).' },
  no_leader: { status: 503, retryable: true, summary: 'The cluster has no leader right now (election in progress or quorum lost).' },
  proposal_dropped: { status: 503, retryable: true, summary: 'The leader refused the write (leadership transfer in progress, too many uncommitted writes).' },
  leader_changed: { status: 503, retryable: true, summary: 'Leadership changed while the request was in flight; the outcome is unknown for writes.' },
  timeout: { status: 504, retryable: true, summary: 'The request did not complete in time; for a write the outcome is unknown.' },
  stopping: { status: 503, retryable: true, summary: 'The node is shutting down.' },
  config_invalid: { status: 400, retryable: false, summary: 'A configuration file or flag is invalid.' },
  storage_format: { status: 500, retryable: false, summary: 'The data directory was written in a storage format this version does not know.' },
  storage_corrupt: { status: 500, retryable: false, summary: 'The node found damaged data in its data directory and refused to start.' },
  revision_mismatch: { status: 409, retryable: false, summary: 'The document is not at the expected revision (If-Match or a txn op\'s expected rev); details has the current rev, or null when absent.' },
  already_exists: { status: 409, retryable: false, summary: 'The document exists but the write required it to be absent (If-None-Match: *); details has its current rev. Or a member with this id or name is already in the cluster.' },
  cursor_expired: { status: 410, retryable: false, summary: 'The watch cursor is older than the retained events; details.oldestRev is the oldest revision still complete. List again and watch from the list revision.' },
  idempotency_conflict: { status: 409, retryable: false, summary: 'The idempotency key was already used by the same principal for a different request.' },
  invalid_command: { status: 400, retryable: false, summary: 'A log entry whose bytes are not a valid command; it was applied as a no-op on every node.' },
  upgrade_required: { status: 503, retryable: true, summary: 'This node met a command from a newer release and stopped applying; upgrade it. Other nodes may serve the request.' },
  feature_not_enabled: { status: 409, retryable: false, summary: 'The command needs a cluster feature level that is not committed yet (a member runs an older release); upgrade every member first.' },
  precondition_failed: { status: 412, retryable: false, summary: 'An If-Match or If-None-Match precondition did not hold; details has the current rev, or null when absent.' },
  method_not_allowed: { status: 405, retryable: false, summary: 'The route exists but not with this method; the Allow header lists the methods it takes.' },
  uri_too_long: { status: 414, retryable: false, summary: 'The request URL (path or query) is longer than the limit.' },
  headers_too_large: { status: 431, retryable: false, summary: 'The request headers are larger than the limit.' },
  overloaded: { status: 503, retryable: true, summary: 'A bound of this node is reached (queued writes or reads, watch streams, connections, snapshot downloads); details names the limit. Retry after Retry-After.' },
  too_many_requests: { status: 429, retryable: true, summary: 'This client address is over its share of a bounded resource; retry after Retry-After.' },
  node_failed: { status: 503, retryable: true, summary: 'This node stopped serving after a fatal error (it is exiting and will be restarted); use another node.' },
  disk_stalled: { status: 503, retryable: true, summary: 'This node\'s disk did not complete a write in time; it stepped down and takes no writes until the disk recovers.' },
  removed: { status: 410, retryable: false, summary: 'This node was removed from the cluster; it takes no requests and exits.' },
  address_in_use: { status: 500, retryable: false, summary: 'A listen address (API or peer port) is already in use or cannot be bound.' },
  data_dir_locked: { status: 500, retryable: false, summary: 'The data directory is in use by another process (another node on the same directory).' },
  join_failed: { status: 503, retryable: true, summary: 'A joining node could not reach the member it was told to join through, or was refused by it.' },
  member_not_ready: { status: 409, retryable: false, summary: 'A membership change refused before anything changed (details.reason): a node to add that does not answer, is of another cluster or is another node; a learner to promote that is unreachable or not caught up. Fix it, wait, or use --force.' },
  ambiguous_name: { status: 400, retryable: false, summary: 'A member name matches more than one member; use the id. details.candidates lists them.' },
  stale_term: { status: 409, retryable: false, summary: 'A leader loop\'s command was appended in another term than the one that decided it (a deposed leader\'s late write); refused on every node.' },
  stale_epoch: { status: 409, retryable: false, summary: 'An agent report of a node epoch that the leader has since raised (the node was declared down); ignored.' },
  service_manager_failed: { status: 500, retryable: false, summary: 'systemctl refused what shoal install or uninstall asked of it; the message has its output.' },
  task_not_started: { status: 409, retryable: false, summary: 'The task has no container to read logs from yet: it is pending (no node fits) or its node has not started it; details.observed says which. Wait until it runs.' },
  node_unreachable: { status: 503, retryable: true, summary: 'The node that runs the task did not answer, or its container runtime is unavailable; its logs cannot be read right now. details.node names it.' },
  token_invalid: { status: 401, retryable: false, summary: 'A join token that cannot be redeemed (details.reason: malformed, other_cluster, ca_rotated, unknown, bad_secret, used, expired, revoked, wrong_role); nothing was changed.' },
  ca_mismatch: { status: 400, retryable: false, summary: 'The CA a node showed does not match the fingerprint in the join token (another cluster, or someone in between); or, said by the CLI, the node\'s certificate is not of the CA the credential pins (details.reason: other_cluster, ca_rotated); nothing was sent or written.' },
  ca_key_unavailable: { status: 503, retryable: true, summary: 'This node does not hold the cluster CA key, so it cannot sign certificates; retry once a voter that holds it leads.' },
  certificate_refused: { status: 403, retryable: false, summary: 'A node\'s certificate or proof of its key is refused (details.reason: not_issued, wrong_node, not_member, not_voter, bad_proof, revoked); nothing was changed.' },
  unauthenticated: { status: 401, retryable: false, summary: 'The request carries no valid credential (details.reason: missing, certificate, token, forwarded_role, revoked, removed): a client certificate of this cluster\'s CA or a bearer token is needed (docs/security.md).' },
  forbidden: { status: 403, retryable: false, summary: 'The caller\'s role may not do this (details.role, details.needed), or the request names a principal of its own (details.reason forged_principal: only nodes may forward one).' },
  net_tool_failed: { status: 500, retryable: true, summary: 'A network tool shoal drives (wg, ip, wireguard-go) failed, timed out or printed what does not parse; the message has the command and its output.' },
  resource_in_use: { status: 409, retryable: false, summary: 'The resource cannot be removed while others use it (a secret that services or jobs name); details lists them.' },
  drill_action_failed: { status: 500, retryable: false, summary: 'A drill action could not be carried out on this node (nft missing or not root for isolate, a helper process that did not start); the message says why. Nothing was changed.' },
  limit_reached: { status: 409, retryable: false, summary: 'A bound of the replicated state is reached (details.limit, details.max): the revoked-certificate list (revokedSerialsMax). Nothing was changed.' },
  disruption_budget_exceeded: { status: 409, retryable: false, summary: 'A voluntary disruption (a drill) would take a service past its disruption budget; details.services names each with its budget and what is unavailable. Nothing was changed: wait, or force it.' },
  release_refused: { status: 409, retryable: false, summary: 'An upgrade step was refused on this node (details.reason: checksum, not_package, npm_install, does_not_start, not_installed, not_process, no_previous, busy, feature_level: the release cannot apply the cluster feature level); nothing was activated.' },
  cluster_key_unavailable: { status: 503, retryable: true, summary: 'Secrets cannot be encrypted or decrypted here right now (details.reason: no_keyring, not_held, locked, no_holder, rotating); retry, or as the message says.' },
  node_locked: { status: 503, retryable: true, summary: 'This node is autolocked: it serves the store but cannot decrypt secrets or sign certificates until it is unlocked (shoal unlock).' },
  unlock_key_invalid: { status: 400, retryable: false, summary: 'The unlock key or recovery key given does not open what it should (mistyped, of another cluster, or an older one); nothing was changed.' },
  recovery_key_required: { status: 400, retryable: false, summary: 'The snapshot holds encrypted secrets, and without the recovery key they cannot be read on new machines; give --recovery-key, or --discard-secrets to restore without them.' },
  autolock_unchanged: { status: 409, retryable: false, summary: 'Autolock is already as asked (on, or off); nothing was changed. A new unlock key while it is on: shoal cluster autolock on --new-key.' },
  // Jobs (issue 42).
  job_run_active: { status: 409, retryable: false, summary: 'shoal job run on a job with concurrency forbid while one of its runs is pending or running (details.run); wait for it, or change the job\'s concurrency.' },
  // Backups (issue 43).
  backup_failed: { status: 502, retryable: true, summary: 'A backup could not be written to its target (unreachable, refused, full, no credential or recovery key); details.target names it. Nothing was listed as a backup.' },
  backup_damaged: { status: 422, retryable: false, summary: 'A backup read back does not match its manifest (a file missing, of another size or digest), or a backup of a volume stream\'s chain is missing or damaged (details.missing); details.problems names each. Restore from another backup.' },
  // Replicated volumes (issue 41, docs/volumes.md).
  volume_tool_failed: { status: 500, retryable: true, summary: 'A program the volume engine drives (mkfs.btrfs, mount, btrfs) failed or timed out on this node (btrfs-progs missing, the loop file full); the message has the command and its output. Nothing was half-kept: a failed receive leaves no version.' },
  volume_copy_refused: { status: 409, retryable: false, summary: 'A holder refused a volume copy (details.reason: stale_epoch: the sender is no longer the volume\'s writer; checksum: the stream\'s sha256 or length differ from what was sent; no_parent: the holder lacks the version the increment is based on; exists: it holds that version already; too_large: the stream announces more than twice the volume\'s size). Nothing was changed.' },
  volume_no_copy: { status: 409, retryable: false, summary: 'A replicated volume cannot be restored as asked: no node holds that complete version, or it is not the newest (a diverged or older copy); details names the newest complete version and its holders. Restoring from nothing needs --empty.' },
  volume_hook_failed: { status: 500, retryable: true, summary: 'A replicated volume\'s hook (replicate.hooks.before or after, run in the task\'s container) exited non-zero, timed out, or found no running container; the message names the hook, its exit code and its stderr\'s tail. That round sent no version; the next interval tries again.' },
  volume_copy_kept: { status: 409, retryable: false, summary: 'A replicated volume\'s copy the operator asked to remove is kept (details.reason: not_diverged: it is a complete copy of the line, remove it with force; last_complete: it is the only complete copy of the newest version; era_base: it is the only copy of the version the current writer starts from). Nothing changed.' },
  volume_in_use: { status: 409, retryable: false, summary: 'A replicated volume cannot be restored while its service has a task running that writes it (stop-first): scale the service to 0, restore, scale it back. Nothing changed.' },
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
