// This node's view of the others (src/resources/peer-views.ts): which members it has not heard
// from for `unheardAfterMs`. Written through the log only when the list changes, at most one
// write in flight and one per `writeEveryMsMin`. While its record stands and every member is
// heard, the next check is at the moment the least recently heard member would turn unheard (a
// silence is seen exactly when it reaches `unheardAfterMs`, and an idle node wakes for it about
// once per that time, not four times a second); otherwise (a member unheard, whose return nothing
// announces, a write pending or refused, not yet listened long enough) every `checkEveryMs`. The leader takes a
// member's committed list as that member's word on who is there (src/control/node-health.ts):
// a node that only the leader cannot hear is not dead.
//
// Every node runs one, the leader included, once the cluster runs the control plane's feature
// level. Nothing is written before the node has listened for `unheardAfterMs` (a peer it never
// heard may simply not have connected yet), and a node that cannot write (no leader, a stalled
// disk) keeps trying at the next check: until then its previous list stands, which errs towards
// "still heard" and so towards holding a verdict back, never towards a false "down".

import { encodeCommand } from '../../fsm/index.ts';
import type { CommandResult, JsonObject } from '../../fsm/types.ts';
import type { DocumentStore } from '../../fsm/index.ts';
import { controlFeatureLevel } from '../resources/collections.ts';
import { peerViewRecordSchema, peerViewsCollection, type PeerViewRecord } from '../resources/peer-views.ts';
import type { ProposalResult } from '../ports/proposer.ts';

/**
 * The least silence after which a member counts as unheard: one and a half of the transport's
 * ping interval (1 s), so a healthy peer, heard at least once a second on each connection, never
 * flickers out of the view.
 */
export const unheardAfterMsMin = 1_500;

/** The view's threshold for a node-health setting: its suspect timeout, and no less than unheardAfterMsMin. */
export function peerViewUnheardAfterMs(health: { suspectAfterMs: number }): number {
  return Math.max(health.suspectAfterMs, unheardAfterMsMin);
}

export interface PeerViewClock {
  now(): number;
  setTimer(delayMs: number, fn: () => void): { cancel(): void };
}

export interface PeerViewReporterOptions {
  self: string;
  store: DocumentStore;
  /** The cluster's members now (voters and learners); this node among them or not. */
  members(): Iterable<string>;
  /** Ms since anything arrived from `id` (undefined: nothing yet): RaftNode.peerContact. */
  heardAgoMs(id: string): number | undefined;
  featureLevel(): number;
  propose(data: Uint8Array, opts: { featureLevel: number }): Promise<ProposalResult>;
  clock: PeerViewClock;
  log: { debug(msg: string): void; info(msg: string): void };
  /** Silence after which a member counts as unheard (config control.suspectAfterMs). */
  unheardAfterMs: number;
  /** How often the list is worked out while it is not settled (default 250 ms; see the top). */
  checkEveryMs?: number;
  /** The least time between two writes, so a flapping link costs at most one write a second (default 1 s). */
  writeEveryMsMin?: number;
}

export class PeerViewReporter {
  private timer: { cancel(): void } | null = null;
  private startedAt = 0;
  private lastWriteAt = Number.NEGATIVE_INFINITY;
  private inFlight = false;
  private closed = false;
  private lastLogged = '';
  /** Writes that committed (tests and metrics). */
  writes = 0;

  constructor(private readonly o: PeerViewReporterOptions) {}

  start(): void {
    this.startedAt = this.o.clock.now();
    this.schedule();
  }

  /** Stops checking; a write in flight finishes on its own. Idempotent. */
  close(): void {
    this.closed = true;
    this.timer?.cancel();
    this.timer = null;
  }

  /** The members this node does not hear now, sorted; null before it has listened long enough to say. */
  unheardNow(): string[] | null {
    if (this.o.clock.now() - this.startedAt < this.o.unheardAfterMs) return null;
    const out: string[] = [];
    for (const id of new Set(this.o.members())) {
      if (id === this.o.self) continue;
      const ago = this.o.heardAgoMs(id);
      if (ago === undefined || ago >= this.o.unheardAfterMs) out.push(id);
    }
    return out.sort();
  }

  private schedule(delayMs = this.o.checkEveryMs ?? 250): void {
    if (this.closed) return;
    this.timer = this.o.clock.setTimer(delayMs, () => {
      this.timer = null;
      let next: number | undefined;
      // A node that halted (removed, a fatal disk error) throws from its synchronous calls until
      // the server closes this reporter: a timer must not turn that into an uncaught exception.
      try {
        if (this.maybeSettled()) next = this.untilNextSilenceMs();
      } catch (err) {
        this.o.log.debug(`peer view: not checked (${(err as Error).message})`);
      }
      this.schedule(next);
    });
  }

  /** Checks the list, writing it if it changed; true when the stored record already says it. */
  private maybeSettled(): boolean {
    if (this.inFlight || this.o.featureLevel() < controlFeatureLevel) return false;
    if (this.o.clock.now() - this.lastWriteAt < (this.o.writeEveryMsMin ?? 1_000)) return false;
    const unheard = this.unheardNow();
    if (unheard === null) return false;
    const record: PeerViewRecord = { nodeId: this.o.self, unheard, unheardAfterMs: this.o.unheardAfterMs };
    const cur = peerViewRecordSchema.safeParse(this.o.store.get(peerViewsCollection, this.o.self)?.doc);
    if (cur.success && JSON.stringify(cur.data) === JSON.stringify(record)) return true;
    this.write(record);
    return false;
  }

  /**
   * Ms until the least recently heard member turns unheard, when every member is heard; else
   * undefined (an unheard member's return is only seen by checking again soon).
   */
  private untilNextSilenceMs(): number | undefined {
    let soonest = this.o.unheardAfterMs;
    for (const id of this.o.members()) {
      if (id === this.o.self) continue;
      const ago = this.o.heardAgoMs(id);
      if (ago === undefined || ago >= this.o.unheardAfterMs) return undefined;
      soonest = Math.min(soonest, this.o.unheardAfterMs - ago);
    }
    return Math.max(1, Math.ceil(soonest));
  }

  private write(record: PeerViewRecord): void {
    this.inFlight = true;
    this.lastWriteAt = this.o.clock.now();
    const data = encodeCommand({
      cmd: { op: 'put', collection: peerViewsCollection, id: this.o.self, doc: record as unknown as JsonObject },
      ts: Date.now(), principal: `shoal:node:${this.o.self}`,
    });
    const what = record.unheard.length === 0 ? 'every member' : `all but ${record.unheard.join(', ')}`;
    Promise.resolve().then(() => this.o.propose(data, { featureLevel: controlFeatureLevel })).then(({ result }) => {
      if (!(result as CommandResult).ok) throw new Error(`refused: ${JSON.stringify(result)}`);
      this.writes++;
      if (this.lastLogged !== what) this.o.log.info(`peer view: this node hears ${what}`);
      this.lastLogged = what;
    }).catch((err: unknown) => {
      this.o.log.debug(`peer view: writing that this node hears ${what} failed (${(err as Error).message}); trying again`);
    }).finally(() => {
      this.inFlight = false;
    });
  }
}
