// The writes a node has proposed and not yet seen applied, and when each may be proposed again.
//
// From feature level 3 every proposal carries the term its proposer was in when it stepped it
// into its core (`e` in the envelope), and an entry whose proposer term differs from the entry's
// own term is applied as a no-op (envelope.ts, RaftNode.applyNormal). So once this node has
// applied an entry of a newer term than a proposal's, that proposal can never be applied any
// more: the log's terms never go down, and an entry of its term appended later would be refused.
// It is then safe to propose the same write again, and the node does so itself instead of
// answering `leader_changed` (issue: a hand-over no client notices). A proposal the core refused
// because there was no leader, or a transfer was under way, is held and proposed again as soon
// as a leader is known. Each keeps its caller's deadline.

export interface PendingProposal {
  /** Encodes the envelope for a proposal stepped in `term` (a new log-time stamp each time). */
  make: (term: number) => Uint8Array;
  resolve: (r: { index: number; result: unknown }) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
  /** The proposer term of the attempt in flight; null while held (not in any log). */
  stampedTerm: number | null;
  /** Attempts so far (for the log and the metrics). */
  attempts: number;
  /** Whether this write may be re-proposed (level 3 envelopes carry a proposer term). */
  reproposable: boolean;
}

export class ProposalBook {
  private readonly pending = new Map<number, PendingProposal>();
  /** Proposals to step into the core at the next loop turn, in order. */
  private queued: number[] = [];
  /** Refused for want of a leader (or during a transfer): proposed again once a leader is known; with when it was held. */
  private held: { seq: number; since: number; why: 'noLeader' | 'transfer' }[] = [];
  /** The applied term of the last scan for stale proposals. */
  private scannedTerm = 0;
  /** Re-proposals since start. */
  reproposed = 0;

  get size(): number {
    return this.pending.size;
  }

  add(seq: number, p: PendingProposal): void {
    this.pending.set(seq, p);
    this.queued.push(seq);
  }

  get(seq: number): PendingProposal | undefined {
    return this.pending.get(seq);
  }

  /** The queued proposals, taken out of the queue, with their bytes for `term`. */
  takeQueued(term: number): { seq: number; data: Uint8Array }[] {
    const out: { seq: number; data: Uint8Array }[] = [];
    // Stamped below the last scan's term (a node that has not caught up with its own term yet): scan again.
    if (term < this.scannedTerm) this.scannedTerm = term;
    for (const seq of this.queued) {
      const p = this.pending.get(seq);
      if (p === undefined) continue;
      p.stampedTerm = term;
      p.attempts++;
      out.push({ seq, data: p.make(term) });
    }
    this.queued = [];
    return out;
  }

  hasQueued(): boolean {
    return this.queued.length > 0;
  }

  /** Held until a leader is known (the core refused it: no leader, or a transfer under way). */
  hold(seq: number, why: 'noLeader' | 'transfer', now: number): void {
    const p = this.pending.get(seq);
    if (p === undefined) return;
    p.stampedTerm = null;
    this.held.push({ seq, since: now, why });
  }

  /** A leader is known: the held proposals go to it. */
  releaseHeld(): boolean {
    if (this.held.length === 0) return false;
    this.queued.push(...this.held.map((h) => h.seq));
    this.held = [];
    return true;
  }

  /**
   * Proposals held for want of a leader for longer than `maxMs`, removed: no election is under
   * way, the cluster has lost its quorum, and they fail fast (no_leader) rather than at the
   * caller's deadline. Those held by a transfer wait: it ends within an election timeout.
   */
  takeHeldLongerThan(now: number, maxMs: number): PendingProposal[] {
    const out: PendingProposal[] = [];
    this.held = this.held.filter((h) => {
      if (h.why !== 'noLeader' || now - h.since < maxMs) return true;
      const p = this.take(h.seq);
      if (p !== undefined) out.push(p);
      return false;
    });
    return out;
  }

  /**
   * An entry of term `appliedTerm` was applied: every reproposable proposal stamped with an older
   * term is now certain never to apply, and is queued again. Returns whether any was.
   */
  reproposeOlderThan(appliedTerm: number): boolean {
    // A proposal is stamped with its proposer's term, never below the term applied then: only a
    // rise of the applied term can make one stale, so the scan runs once per term.
    if (appliedTerm <= this.scannedTerm) return false;
    this.scannedTerm = appliedTerm;
    let any = false;
    for (const [seq, p] of this.pending) {
      if (!p.reproposable || p.stampedTerm === null || p.stampedTerm >= appliedTerm) continue;
      p.stampedTerm = null;
      this.queued.push(seq);
      this.reproposed++;
      any = true;
    }
    return any;
  }

  /**
   * This node installed a snapshot: a proposal in flight may have been applied inside it, where
   * this node never saw it, so neither a newer applied term nor the deadline proves any more that
   * it was not. Proposing it again could apply the write twice: those in flight keep their one
   * attempt, and answer when it applies here or end with an unknown outcome.
   */
  snapshotInstalled(): void {
    for (const p of this.pending.values()) if (p.stampedTerm !== null) p.reproposable = false;
  }

  /** Removes and returns a proposal (it was applied, failed or timed out). */
  take(seq: number): PendingProposal | undefined {
    const p = this.pending.get(seq);
    if (p === undefined) return undefined;
    this.pending.delete(seq);
    clearTimeout(p.timer);
    return p;
  }

  /** Every pending proposal, removed (the node stops, or fails them all). */
  drain(): PendingProposal[] {
    const all = [...this.pending.values()];
    for (const p of all) clearTimeout(p.timer);
    this.pending.clear();
    this.queued = [];
    this.held = [];
    return all;
  }

  /** Proposals that are not reproposable (level < 3), removed: the old behaviour fails them on a change of leader. */
  drainNotReproposable(): PendingProposal[] {
    const out: PendingProposal[] = [];
    for (const [seq, p] of this.pending) {
      if (p.reproposable) continue;
      this.pending.delete(seq);
      clearTimeout(p.timer);
      out.push(p);
    }
    return out;
  }
}
