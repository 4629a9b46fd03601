// The supervisor of the leader's loops (design.md, Control plane and Fencing). The loops run on a
// node only while it is leader *and* has applied an entry of its own term (its view of the store
// then includes everything committed before it became leader), and the cluster runs at the
// control plane's feature level. Each run belongs to one term (leader-run.ts): every command it
// proposes is fenced by that term, the driver refuses to propose it once the node no longer leads
// that term, and the state machine refuses it if it lands in another term's entry. A change of
// leadership stops the run (and awaits it) before another can start.

import { randomBytes } from 'node:crypto';
import type { DocumentStore } from '../../fsm/index.ts';
import type { Logger } from '../log.ts';
import type { Leadership, LeaderLog } from '../ports/leadership.ts';
import type { MembershipView } from '../ports/membership-view.ts';
import type { Proposer } from '../ports/proposer.ts';
import { controlFeatureLevel } from '../resources/collections.ts';
import { LeaderRun, type LeaderRunPorts, type PassReport } from './leader-run.ts';
import type { VipLeaseConfig, VipSpec } from '../resources/vips.ts';
import { RenewalLog, vipRenewals } from './renewal-log.ts';
import type { LeaseConfig } from '../resources/lease.ts';
import type { NodeHealthConfig } from './node-health.ts';

export interface SupervisorOptions {
  node: Leadership & LeaderLog & Proposer & Pick<MembershipView, 'confState'>;
  store: DocumentStore;
  log: Logger;
  health: NodeHealthConfig;
  /** New task ids (default: 12 random hex digits). */
  newTaskId?: () => string;
  /** Told of each pass of the loops (the node's metrics). */
  observeLoops?: (pass: PassReport) => void;
  /** The range the leader allocates mesh addresses from (config `mesh.cidr`). */
  meshCidr?: string;
  /** The exclusive-task lease (config `exclusive`; default leaseDefaults). */
  lease?: LeaseConfig;
  /** The VIP lease (config `vipLeaseMs`, `exclusive.driftRho`; default vipLeaseDefaults). */
  vipLease?: VipLeaseConfig;
  /** Hands leadership to `to` (RaftNode.transferLeadership); absent: node health never hands over. */
  transferLeadership?: (to: string) => Promise<unknown>;
  /** Why scheduled job runs must not fire now (the clock rule, src/node/clock-watch.ts); absent: they may. */
  jobClockHold?: () => string | null;
  /** The virtual IPs (config `vips`); absent: this leader manages none. */
  vips?: readonly VipSpec[];
  /** Told of each VIP that changed holder (the node's events and metrics). */
  onVipMoved?: LeaderRunPorts['onVipMoved'];
}

const clock = {
  now: () => performance.now(),
  setTimeout: (fn: () => void, ms: number): unknown => setTimeout(fn, ms),
  clearTimeout: (h: unknown): void => clearTimeout(h as NodeJS.Timeout),
};

export class Supervisor {
  private run: LeaderRun | undefined;
  private stopping: Promise<void> | undefined;
  private closed = false;
  private readonly newTaskId: () => string;
  private readonly onNodeEvent = (): void => this.check();
  private readonly onFeatureLevel = (): void => this.run?.featureLevelRaised();
  /** Runs started since start (for metrics and tests). */
  runs = 0;
  /** When node health last handed leadership over (monotonic ms), across runs: the hand-over's rate limit. */
  private lastTransferAt: number | undefined;
  /** Hand-overs node health asked for (tests and metrics). */
  transfers = 0;
  /** When this node's store applied each lease renewal, since start(): every run's exclusive wait counts from it. */
  private renewals: RenewalLog | undefined;
  /** The same for the VIP lease and the grants of VIPs (vipRenewals). */
  private vipRenewals: RenewalLog | undefined;

  constructor(private readonly opts: SupervisorOptions) {
    this.newTaskId = opts.newTaskId ?? (() => randomBytes(6).toString('hex'));
  }

  start(): void {
    const n = this.opts.node;
    this.renewals ??= new RenewalLog(this.opts.store, () => clock.now());
    this.vipRenewals ??= new RenewalLog(this.opts.store, () => clock.now(), vipRenewals);
    n.on('leaderChange', this.onNodeEvent);
    n.on('applied', this.onNodeEvent);
    n.on('featureLevel', this.onNodeEvent);
    n.on('featureLevel', this.onFeatureLevel);
    this.check();
  }

  /** The term whose loops run here, or null. */
  get runningTerm(): number | null {
    return this.run?.term ?? null;
  }

  /** The current run's counters (passes, proposals, conflicts), or null. */
  get counts(): LeaderRun['counts'] | null {
    return this.run?.counts ?? null;
  }

  /** Stops the loops and awaits them; idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    const n = this.opts.node;
    n.off('leaderChange', this.onNodeEvent);
    n.off('applied', this.onNodeEvent);
    n.off('featureLevel', this.onNodeEvent);
    n.off('featureLevel', this.onFeatureLevel);
    await this.stopRun();
    this.renewals?.close();
    this.vipRenewals?.close();
  }

  private check(): void {
    const n = this.opts.node;
    const mayRun = !this.closed && n.isLeader && n.appliedTerm === n.currentTerm && n.featureLevel >= controlFeatureLevel && n.failure === undefined;
    if (this.run !== undefined && (!mayRun || this.run.term !== n.currentTerm)) void this.stopRun().then(() => this.check());
    else if (this.run === undefined && this.stopping === undefined && mayRun) this.startRun(n.currentTerm);
  }

  private startRun(term: number): void {
    const n = this.opts.node;
    const log = this.opts.log;
    const run = new LeaderRun({
      store: this.opts.store, clock, logTimeNow: () => n.logTimeNow(), self: n.id, health: this.opts.health,
      members: () => {
        const cs = n.confState();
        return new Set([...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext]);
      },
      silentForMs: (id) => n.silentForMs(id),
      peerContact: (id) => n.peerContact(id),
      voters: () => {
        const cs = n.confState();
        return new Set([...cs.voters, ...cs.votersOutgoing]);
      },
      lastTransferAgoMs: () => (this.lastTransferAt === undefined ? undefined : clock.now() - this.lastTransferAt),
      ...(this.opts.transferLeadership !== undefined ? { transferLeadership: (to: string) => this.handOver(to) } : {}),
      propose: (data, t, _meta, featureLevel) => n.propose(data, { featureLevel, term: t }),
      settleOwnProposals: () => n.settleOwnProposals(),
      newTaskId: this.newTaskId,
      log,
      ...(this.opts.meshCidr !== undefined ? { meshCidr: this.opts.meshCidr } : {}),
      ...(this.opts.lease !== undefined ? { lease: this.opts.lease } : {}),
      ...(this.renewals !== undefined ? { renewals: this.renewals } : {}),
      ...(this.vipRenewals !== undefined ? { vipRenewals: this.vipRenewals } : {}),
      ...(this.opts.vipLease !== undefined ? { vipLease: this.opts.vipLease } : {}),
      ...(this.opts.observeLoops !== undefined ? { observe: this.opts.observeLoops } : {}),
      ...(this.opts.jobClockHold !== undefined ? { jobClockHold: this.opts.jobClockHold } : {}),
      featureLevel: () => n.featureLevel,
      ...(this.opts.vips !== undefined ? { vips: this.opts.vips } : {}),
      ...(this.opts.onVipMoved !== undefined ? { onVipMoved: this.opts.onVipMoved } : {}),
    }, term);
    this.run = run;
    this.runs++;
    log.info(`leader loops started for term ${term}`);
    run.start();
    run.done.catch((err: unknown) => log.error(`leader loops of term ${term} failed: ${(err as Error).stack ?? String(err)}`));
  }

  /** Node health found a node only this leader cannot hear: leadership goes to `to`, rate-limited across runs. */
  private handOver(to: string): void {
    const transfer = this.opts.transferLeadership;
    if (transfer === undefined || this.closed) return;
    this.lastTransferAt = clock.now();
    this.transfers++;
    transfer(to).then(
      (leader) => this.opts.log.info(`node health: leadership handed to ${String(leader)}`),
      (err: unknown) => this.opts.log.warn(`node health: handing leadership to ${to} failed: ${(err as Error).message}`),
    );
  }

  private async stopRun(): Promise<void> {
    const run = this.run;
    if (run === undefined) return this.stopping;
    this.run = undefined;
    run.stop();
    this.stopping = run.done.catch(() => undefined).finally(() => {
      this.stopping = undefined;
      this.opts.log.info(`leader loops of term ${run.term} stopped`);
    });
    return this.stopping;
  }
}
