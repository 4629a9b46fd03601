// The jobs' clock rule at work on this node (docs/control-plane.md, Jobs, "Clocks"): it asks the
// transport for the members' clocks (RaftNode.peerContact: each pong carries the peer's wall
// clock), the system whether this clock is synchronized (clock-sync.ts), applies the rule
// (src/control/clock-sanity.ts), and fills the leader's `jobClockHold` port with the answer. It
// says why jobs are held: a cluster event when a hold starts (`job.clock_held`) and ends
// (`job.clock_released`), a log line, the gauge shoal_job_clock_hold, and `report()` for
// GET /v1/jobs (its `clock` field) and `shoal doctor`.
//
// Only the leader fires scheduled runs, so only a leader records events and reports 1 on the
// gauge; every node's report still shows the offsets it measures and what the rule would say.

import type { JsonObject } from '../../fsm/index.ts';
import type { Logger } from '../log.ts';
import type { PeerContact } from '../ports/leadership.ts';
import type { ConfState } from '../raft/types.ts';
import { assessClock, jobClockSkewMaxMsDefault, offsetsOf } from '../control/clock-sanity.ts';

/** How often a leader looks at the clocks on its own (besides each job pass), so a hold's start and end are told promptly. */
export const clockCheckEveryMs = 5_000;

export const JOB_CLOCK_HOLD_METRIC = {
  name: 'shoal_job_clock_hold',
  help: 'Whether this node leads and holds scheduled job runs because its clock is not synchronized or is too far from the members\' median (1), or not (0).',
} as const;

export interface ClockWatchOptions {
  node: { readonly id: string; readonly isLeader: boolean; peerContact(id: string): PeerContact; confState(): ConfState };
  /** This machine's clock synchronization: true, false, or undefined (unknown). */
  synchronized: () => boolean | undefined;
  /** How far the leader's clock may be from the members' median (default jobClockSkewMaxMsDefault). */
  skewMaxMs?: number;
  /** Records a cluster event (the node's EventLog.recordEvent). */
  record: (type: string, subject: string, details: JsonObject) => void;
  log: Pick<Logger, 'info' | 'warn'>;
  checkEveryMs?: number;
}

/** What this node knows of the clocks, and what the rule says (GET /v1/jobs `clock`). */
export interface ClockReport {
  node: string;
  leader: boolean;
  /** Whether this node's clock is synchronized; null: unknown (never holds). */
  synchronized: boolean | null;
  skewMaxMs: number;
  /** This node's clock minus the members' median, ms; null when no other member's clock is known. */
  skewMs: number | null;
  /** Each other member's clock minus this node's, ms; null: unknown (a previous-release peer, no recent pong). */
  offsets: { node: string; offsetMs: number | null }[];
  /** Why this node, leading, would fire no scheduled run; null: it may fire them. */
  hold: string | null;
}

export class ClockWatch {
  private readonly skewMaxMs: number;
  /** The reason of the hold under way on this leader; null: none (or not leading). */
  private heldSince: string | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly opts: ClockWatchOptions) {
    this.skewMaxMs = opts.skewMaxMs ?? jobClockSkewMaxMsDefault;
  }

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.jobClockHold(), this.opts.checkEveryMs ?? clockCheckEveryMs);
    this.timer.unref();
  }

  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** Whether this node leads and holds scheduled runs now (the gauge). */
  get holding(): boolean {
    return this.heldSince !== null;
  }

  report(): ClockReport {
    const n = this.opts.node;
    const cs = n.confState();
    const members = [...new Set([...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext])].sort();
    const offsets = offsetsOf(n.id, members, (id) => n.peerContact(id));
    const synchronized = this.opts.synchronized();
    const verdict = assessClock({ self: n.id, offsets, synchronized, skewMaxMs: this.skewMaxMs });
    return {
      node: n.id, leader: n.isLeader, synchronized: synchronized ?? null, skewMaxMs: this.skewMaxMs, skewMs: verdict.skewMs,
      offsets: members.filter((id) => id !== n.id).map((id) => ({ node: id, offsetMs: offsets.get(id) ?? null })),
      hold: verdict.hold,
    };
  }

  /** The leader's port (LeaderRun's jobClockHold): the rule's answer now; tells a hold's start and end. */
  jobClockHold(): string | null {
    const r = this.report();
    const hold = r.leader ? r.hold : null;
    if (hold !== null && this.heldSince === null) {
      this.opts.log.warn(`scheduled jobs held: ${hold}`);
      this.opts.record('job.clock_held', this.opts.node.id, { reason: hold, skewMs: r.skewMs, synchronized: r.synchronized });
    } else if (hold === null && this.heldSince !== null) {
      // A leader that stepped down says nothing more: the next leader's rule is its own.
      if (r.leader) {
        this.opts.log.info('scheduled jobs no longer held: this leader\'s clock agrees with the members\' again');
        this.opts.record('job.clock_released', this.opts.node.id, { skewMs: r.skewMs, synchronized: r.synchronized });
      }
    }
    this.heldSince = hold;
    return hold;
  }
}
