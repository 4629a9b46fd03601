// The nemesis: a schedule of faults on a FaultCluster, chosen by a seeded PRNG. Each cycle runs
// every kind of fault once, in a shuffled order; each fault is held for a few seconds, healed,
// and followed by a quiet spell in which the cluster should recover. Every step is written to
// nemesis.jsonl with the same clock as the history (performance.now()), so a failed run's
// history can be read against what the network and the processes were doing.
//
// The PRNG fixes the order of faults and the choice of nodes by role ("the leader", "a
// follower"); which process is the leader at that moment is up to the cluster, so a seed does
// not replay a real-process run exactly the way it replays a simulation.

import { appendFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { SeededPrng } from '../../src/raft/prng.ts';
import { PeerFuzzer } from '../cluster/peer-fuzzer.ts';
import type { FaultCluster, FaultNode } from './fault-cluster.ts';
import { call, sleep, type HttpResult } from './http.ts';
import { cutsBetween, type Cut } from './netns.ts';

export const faultKinds = [
  /** One member cut off from the others, both ways (a minority and a majority). */
  'partition-minority',
  /** The current leader cut off from every other member. */
  'isolate-leader',
  /** One member sees both sides; the two sides do not see each other. */
  'bridge',
  /** Packets from one member to another dropped, the other direction untouched. */
  'one-way',
  /** kill -9 of the leader or a follower, restarted after the hold. */
  'kill',
  /** SIGSTOP of the leader or a follower, SIGCONT after the hold. */
  'pause',
  /** POST /v1/cluster/leader, to a chosen member or to the best one. */
  'transfer-leader',
  /** A fresh node added as a learner, promoted to voter, then another voter removed. */
  'membership',
  /**
   * A member gone bad on the wire: with a member's certificate, garbage, malformed and
   * meaningless frames and frames of past terms to another member (test/cluster/peer-fuzzer.ts).
   */
  'garbage',
] as const;

export type FaultKind = (typeof faultKinds)[number];

export interface NemesisOptions {
  /** How long a fault is held, drawn from [min, max] ms. */
  holdMs: readonly [number, number];
  /** Quiet time after healing, drawn from [min, max] ms. */
  quietMs: readonly [number, number];
  /** Where the schedule is written, one JSON object per line. */
  logPath: string;
}

export interface NemesisRecord {
  time: number;
  wall: string;
  event: 'start' | 'heal' | 'step' | 'error' | 'heal-all';
  kind?: FaultKind;
  detail: string;
}

type Healer = () => Promise<void>;

/** Admin requests keep trying for this long before the fault counts as failed. */
const adminDeadlineMs = 30_000;
/** A process start is about 2 s on an idle machine, over 15 s on a busy one (tsx compiles the sources). */
const startMs = 60_000;

export class Nemesis {
  /** Faults carried out to the end, by kind. */
  readonly done: Record<FaultKind, number> = Object.fromEntries(faultKinds.map((k) => [k, 0])) as Record<FaultKind, number>;
  /** Faults that could not be carried out: the cluster did not do what an operator asked. */
  readonly errors: string[] = [];
  private stopped = false;

  constructor(private readonly cluster: FaultCluster, private readonly prng: SeededPrng, private readonly opts: NemesisOptions) {}

  /** Runs whole cycles until `durationMs` has passed (at least one whole cycle). */
  async run(durationMs: number): Promise<void> {
    const end = performance.now() + durationMs;
    for (let cycle = 0; !this.stopped && (cycle === 0 || performance.now() < end); cycle++) {
      for (const kind of this.shuffled()) {
        if (this.stopped || (cycle > 0 && performance.now() >= end)) return;
        await this.one(kind);
      }
    }
  }

  /** Makes run() return after the fault in progress. */
  stop(): void {
    this.stopped = true;
  }

  /** Ends every fault: the network healed, paused members resumed, stopped members started. */
  async healAll(): Promise<void> {
    const c = this.cluster;
    await c.lab.heal();
    for (const n of c.nodes) c.resume(n);
    for (const n of c.nodes) if (!n.member && n.proc) await c.kill(n);
    for (const n of c.members()) if (!n.proc) await c.start(n);
    this.log({ event: 'heal-all', detail: `members ${c.members().map((n) => n.name).join(', ')}` });
  }

  /** After a failed membership change: believe the leader about who the members are. */
  private async reconcileMembership(): Promise<void> {
    const r = await this.cluster.admin('GET', '/v1/cluster');
    if (r.kind !== 'answer' || r.status !== 200) return;
    const view = r.body as { view: string; members: { id: string }[] };
    if (view.view !== 'leader') return;
    const ids = new Set(view.members.map((m) => m.id));
    for (const n of this.cluster.nodes) n.member = ids.has(n.id);
    this.log({ event: 'step', detail: `membership per the leader: ${names(this.cluster.members())}` });
  }

  private async one(kind: FaultKind): Promise<void> {
    let heal: Healer | undefined;
    try {
      heal = await this.inflict(kind);
      await sleep(this.draw(this.opts.holdMs));
      await heal();
      this.log({ event: 'heal', kind, detail: '' });
      this.done[kind]++;
    } catch (err) {
      const message = `${kind}: ${(err as Error).message}`;
      this.errors.push(message);
      this.log({ event: 'error', kind, detail: message });
      await this.reconcileMembership().catch(() => undefined);
      await this.healAll().catch(() => undefined);
    }
    await sleep(this.draw(this.opts.quietMs));
  }

  private inflict(kind: FaultKind): Promise<Healer> {
    switch (kind) {
      case 'partition-minority': return this.partitionMinority();
      case 'isolate-leader': return this.isolateLeader();
      case 'bridge': return this.bridge();
      case 'one-way': return this.oneWay();
      case 'kill': return this.kill();
      case 'pause': return this.pause();
      case 'transfer-leader': return this.transferLeader();
      case 'membership': return this.membership();
      case 'garbage': return this.garbage();
    }
  }

  private async cut(kind: FaultKind, cuts: Cut[], detail: string): Promise<Healer> {
    await this.cluster.lab.setCuts(cuts);
    this.log({ event: 'start', kind, detail: `${detail}; cuts ${cuts.map((c) => `${c.from}->${c.to}`).join(' ')}` });
    return () => this.cluster.lab.heal();
  }

  private async partitionMinority(): Promise<Healer> {
    const members = this.prng.shuffle([...this.cluster.members()]);
    const minority = members.slice(0, Math.floor((members.length - 1) / 2));
    const majority = members.slice(minority.length);
    return this.cut('partition-minority', cutsBetween(slots(minority), slots(majority)), `minority ${names(minority)} | majority ${names(majority)}`);
  }

  private async isolateLeader(): Promise<Healer> {
    const leader = await this.leaderOrAny();
    const others = this.cluster.members().filter((n) => n !== leader);
    return this.cut('isolate-leader', cutsBetween([leader.slot], slots(others)), `leader ${leader.name} alone`);
  }

  private async bridge(): Promise<Healer> {
    const [bridge, ...rest] = this.prng.shuffle([...this.cluster.members()]);
    if (bridge === undefined) throw new Error('no members');
    const half = Math.ceil(rest.length / 2);
    const a = rest.slice(0, half);
    const b = rest.slice(half);
    return this.cut('bridge', cutsBetween(slots(a), slots(b)), `${names(a)} | bridge ${bridge.name} | ${names(b)}`);
  }

  private async oneWay(): Promise<Healer> {
    const leader = await this.leaderOrAny();
    const follower = this.pick(this.cluster.members().filter((n) => n !== leader));
    const [from, to] = this.prng.chance(0.5) ? [leader, follower] : [follower, leader];
    return this.cut('one-way', [{ from: from.slot, to: to.slot }], `${from.name} -> ${to.name} dropped (${from === leader ? 'leader to follower' : 'follower to leader'})`);
  }

  private async kill(): Promise<Healer> {
    const { node, role } = await this.leaderOrFollower();
    await this.cluster.kill(node);
    this.log({ event: 'start', kind: 'kill', detail: `kill -9 ${node.name} (${role})` });
    return async () => {
      await this.cluster.start(node);
      await this.cluster.waitServing(node, startMs);
    };
  }

  private async pause(): Promise<Healer> {
    const { node, role } = await this.leaderOrFollower();
    this.cluster.pause(node);
    this.log({ event: 'start', kind: 'pause', detail: `SIGSTOP ${node.name} (${role})` });
    return async () => this.cluster.resume(node);
  }

  private async transferLeader(): Promise<Healer> {
    const leader = await this.leaderOrAny();
    const to = this.prng.chance(0.7) ? this.pick(this.cluster.members().filter((n) => n !== leader)) : undefined;
    const r = await this.adminUntil(`transfer leadership from ${leader.name} to ${to?.name ?? '(best)'}`,
      () => this.cluster.admin('POST', '/v1/cluster/leader', to ? { to: to.id } : {}), (a) => a.status === 200);
    this.log({ event: 'start', kind: 'transfer-leader', detail: `from ${leader.name} to ${to?.name ?? '(best)'}: ${JSON.stringify(r.body)}` });
    return async () => undefined;
  }

  /**
   * Frames a correct cluster must shrug off, from one member (by its certificate) to another,
   * leader or follower, for the whole hold; the member's real connection and the fuzzer's keep
   * replacing each other. Healing stops the fuzzer.
   */
  private async garbage(): Promise<Healer> {
    const { node: target, role } = await this.leaderOrFollower();
    const as = this.pick(this.cluster.members().filter((n) => n !== target));
    const members = this.cluster.members().map((n) => n.id);
    const term = async (): Promise<number> => {
      const r = await call(target.apiAddress, '/healthz', { timeoutMs: 1000 });
      return r.kind === 'answer' ? ((r.body as { term?: number }).term ?? 0) : 0;
    };
    const fuzzer = new PeerFuzzer({ as, target, members, term, seed: this.prng.nextInt(1_000_000) });
    const running = fuzzer.run(this.opts.holdMs[1] + adminDeadlineMs);
    this.log({ event: 'start', kind: 'garbage', detail: `frames to ${target.name} (${role}) as ${as.name}` });
    return async () => {
      fuzzer.stop();
      const s = await running;
      this.log({ event: 'step', kind: 'garbage', detail: `sent ${s.dropped} to drop, ${s.stale} of past terms, ${s.textFrames} text; skipped ${s.skipped}; connections ${s.connections} (${s.failedConnections} failed)` });
      if (s.connections === 0) throw new Error(`garbage: could not connect to ${target.name}'s peer port as ${as.name}`);
    };
  }

  /** Add a fresh node as a learner, let it catch up, promote it, then remove another voter. */
  private async membership(): Promise<Healer> {
    const c = this.cluster;
    const spare = c.nodes.find((n) => !n.member);
    if (spare === undefined) throw new Error('no spare slot for a new member');
    const joinVia = this.pick(c.live());
    await c.resetSpare(spare, joinVia.apiAddress);
    await c.start(spare);
    await c.waitServing(spare, startMs);
    this.log({ event: 'start', kind: 'membership', detail: `started ${spare.name} as ${spare.id}, waiting to be added` });
    await this.adminUntil(`add ${spare.name} as a learner`, () => c.admin('POST', '/v1/cluster/members', c.record(spare)),
      (a) => a.status === 201 || a.code === 'already_exists');
    spare.member = true;
    this.log({ event: 'step', kind: 'membership', detail: `${spare.name} added as a learner` });
    await c.waitReady(spare, adminDeadlineMs);
    await sleep(this.draw(this.opts.holdMs) / 3);
    await this.adminUntil(`promote ${spare.name}`, () => c.admin('POST', `/v1/cluster/members/${spare.id}/promote`), (a) => a.status === 200,
      async () => (await this.roleOf(spare.id)) === 'voter');
    this.log({ event: 'step', kind: 'membership', detail: `${spare.name} promoted to voter` });
    await sleep(this.draw(this.opts.holdMs) / 3);
    const { node: victim, role } = await this.leaderOrFollower([spare]);
    c.removing.add(victim.id);
    await this.adminUntil(`remove ${victim.name}`, () => c.admin('DELETE', `/v1/cluster/members/${victim.id}`),
      (a) => a.status === 200 || a.code === 'not_found', async () => (await this.roleOf(victim.id)) === 'absent');
    victim.member = false;
    await c.kill(victim);
    this.log({ event: 'step', kind: 'membership', detail: `${victim.name} (${role}) removed and stopped; voters ${names(c.members())}` });
    return async () => undefined;
  }

  /**
   * Repeats an admin request until `accept` takes an answer or `verify` shows it took effect
   * (an answer can be lost while the change goes through), for up to adminDeadlineMs.
   */
  private async adminUntil(what: string, request: () => Promise<HttpResult>, accept: (a: Extract<HttpResult, { kind: 'answer' }>) => boolean,
    verify?: () => Promise<boolean>): Promise<Extract<HttpResult, { kind: 'answer' }>> {
    const deadline = performance.now() + adminDeadlineMs;
    let last = '';
    while (performance.now() < deadline) {
      const r = await request();
      if (r.kind === 'answer' && accept(r)) return r;
      // member_not_ready: the leader's guardrail (new node not answering yet, learner not caught up) passes with time.
      if (r.kind === 'answer' && r.status >= 400 && r.status < 500 && r.code !== 'not_found' && r.code !== 'already_exists' && r.code !== 'member_not_ready') {
        throw new Error(`${what}: refused with ${r.status} ${JSON.stringify(r.body)}`);
      }
      last = r.kind === 'answer' ? `${r.status} ${r.code ?? ''}` : r.error;
      if (verify && await verify()) return { kind: 'answer', status: 200, body: { verified: true }, code: undefined };
      await sleep(250);
    }
    throw new Error(`${what}: not done within ${adminDeadlineMs} ms (last answer: ${last})`);
  }

  /** The member's role according to the leader's view, or 'unknown' when no leader answers. */
  private async roleOf(id: string): Promise<'voter' | 'learner' | 'absent' | 'unknown'> {
    const r = await this.cluster.admin('GET', '/v1/cluster');
    if (r.kind !== 'answer' || r.status !== 200) return 'unknown';
    const view = r.body as { view: string; members: { id: string; role: 'voter' | 'learner' }[] };
    if (view.view !== 'leader') return 'unknown';
    return view.members.find((m) => m.id === id)?.role ?? 'absent';
  }

  private async leaderOrAny(): Promise<FaultNode> {
    return (await this.cluster.currentLeader()) ?? this.pick(this.cluster.members());
  }

  /** The leader or a follower, half and half; `exclude` is never chosen. */
  private async leaderOrFollower(exclude: FaultNode[] = []): Promise<{ node: FaultNode; role: string }> {
    const leader = await this.cluster.currentLeader();
    const candidates = this.cluster.members().filter((n) => !exclude.includes(n));
    if (leader !== undefined && candidates.includes(leader) && this.prng.chance(0.5)) return { node: leader, role: 'leader' };
    const followers = candidates.filter((n) => n !== leader);
    return { node: this.pick(followers.length > 0 ? followers : candidates), role: leader === undefined ? 'no leader known' : 'follower' };
  }

  private shuffled(): FaultKind[] {
    return this.prng.shuffle([...faultKinds]);
  }

  private pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('nothing to choose from');
    return items[this.prng.nextInt(items.length)] as T;
  }

  private draw([min, max]: readonly [number, number]): number {
    return min + this.prng.nextInt(max - min + 1);
  }

  private log(r: Omit<NemesisRecord, 'time' | 'wall'>): void {
    const record: NemesisRecord = { time: performance.now(), wall: new Date().toISOString(), ...r };
    appendFileSync(this.opts.logPath, `${JSON.stringify(record)}\n`);
  }
}

const slots = (nodes: readonly FaultNode[]): number[] => nodes.map((n) => n.slot);
const names = (nodes: readonly FaultNode[]): string => nodes.map((n) => n.name).join(',') || '(none)';
