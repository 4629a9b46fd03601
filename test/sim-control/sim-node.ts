// One machine of the simulated cluster: its container runtime (which outlives shoal), and, while
// shoal runs on it, its applied store (a prefix of the modelled log, so it lags), what it
// believes about leadership, its agent and, while it believes it leads, its leader loops.

import { DocumentStore } from '../../fsm/index.ts';
import type { CommandResult } from '../../fsm/types.ts';
import type { NodeIdentity } from '../../src/executor/store-ports.ts';
import type { Agent } from '../../src/executor/agent.ts';
import type { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import { controlFeatureLevel } from '../../src/resources/collections.ts';
import type { LeaderRun } from '../../src/control/leader-run.ts';
import type { PeerViewReporter } from '../../src/node/peer-view-reporter.ts';
import type { RenewalLog } from '../../src/control/renewal-log.ts';
import { MemoryLeaseStore } from '../../src/executor/lease-keeper.ts';
import type { LogEntry } from './log-entry.ts';
import type { NodeClock } from './node-clock.ts';
import type { Session } from './session.ts';

/** up: shoal runs; crashed: shoal was killed (containers run on); dead: the machine is off (containers died). */
export type NodeState = 'up' | 'crashed' | 'dead';

export class SimNode {
  state: NodeState = 'up';
  store = new DocumentStore();
  /** Index and term of the last entry applied here. */
  applied = 0;
  appliedTerm = 0;
  /** The newest term this node knows, and whether it believes it leads that term. */
  knownTerm = 0;
  role: 'leader' | 'follower' = 'follower';
  /** The step at which it hears of the current leader's term (set when first connected to it). */
  learnAt: number | null = null;
  /** Steps a leader has spent cut off from a majority (CheckQuorum). */
  isolatedSteps = 0;
  /** No applies before this step (a stall). */
  stalledUntil = 0;
  /** The step a crashed or dead node comes back at. */
  returnAt = 0;
  session: Session | null = null;
  agent: Agent | null = null;
  loops: LeaderRun | null = null;
  /** This incarnation's peer view (what it hears of the others), as every real node writes it. */
  views: PeerViewReporter | null = null;
  /** This incarnation's record of when its store applied each lease renewal (the supervisor's, in a real node). */
  renewals: RenewalLog | null = null;
  incarnation = 0;
  /** When this incarnation started (world ms): it listens for its peers from then. */
  sessionStartedAt = 0;
  /** When shoal on this machine last stopped gracefully (a goodbye to its peers); null: its last stop was not graceful. */
  goodbyeAt: number | null = null;
  /** When this incarnation's node health last handed leadership over (world ms). */
  lastTransferAt: number | undefined;
  /** When this incarnation last heard from each node (what the real node's silentForMs is built from). */
  readonly lastHeard = new Map<string, number>();
  /** When this incarnation's dials to each node were last refused (its machine up, shoal not running there). */
  readonly refusedAt = new Map<string, number>();
  private barriers: { target: number; resolve: () => void }[] = [];
  /** The lease directory on the machine's disk: it outlives shoal, not the machine (a new boot). */
  readonly leases = new MemoryLeaseStore();

  constructor(readonly id: string, readonly identity: NodeIdentity, readonly runtime: MemoryRuntime, readonly clock: NodeClock) {}

  get isUp(): boolean {
    return this.state === 'up';
  }

  /** Applies log entries up to `target`; a proposal of this incarnation resolves when its entry applies. */
  applyUpTo(entries: readonly LogEntry[], target: number): void {
    while (this.applied < target) {
      const e = entries[this.applied] as LogEntry;
      let result: CommandResult | undefined;
      if (e.data !== null) result = this.store.apply({ index: e.index, term: e.term, data: e.data, logTimeMs: e.logTimeMs, featureLevel: controlFeatureLevel });
      this.applied = e.index;
      this.appliedTerm = e.term;
      const p = e.proposal;
      if (p !== null && result !== undefined && p.session === this.session) p.settle({ ok: { index: e.index, result } });
    }
    if (this.barriers.length === 0) return;
    const still: typeof this.barriers = [];
    for (const b of this.barriers) {
      if (b.target <= this.applied) b.resolve();
      else still.push(b);
    }
    this.barriers = still;
  }

  /** Resolves once this node has applied index `target`. */
  barrier(target: number): Promise<void> {
    if (this.applied >= target) return Promise.resolve();
    return new Promise((resolve) => this.barriers.push({ target, resolve }));
  }

  /** Stops this incarnation of shoal at once (kill -9, or the machine going off). */
  stop(state: Exclude<NodeState, 'up'>): void {
    this.session?.kill();
    this.session = null;
    this.agent = null;
    this.views?.close();
    this.views = null;
    this.renewals?.close();
    this.renewals = null;
    this.lastTransferAt = undefined;
    this.loops?.stop();
    this.loops = null;
    this.barriers = [];
    this.state = state;
    this.role = 'follower';
    this.learnAt = null;
    this.isolatedSteps = 0;
  }

  /**
   * Shoal starts again: its store is rebuilt from what it had on disk (a snapshot and the log it
   * had persisted), which may be a little behind what it had applied before it stopped.
   */
  reopen(entries: readonly LogEntry[], upTo: number): void {
    this.store = new DocumentStore();
    this.applied = 0;
    this.appliedTerm = 0;
    this.lastHeard.clear();
    this.refusedAt.clear();
    this.applyUpTo(entries, upTo);
    this.state = 'up';
    this.incarnation++;
  }
}
