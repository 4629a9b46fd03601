// The operator: applies the services, updates them (to images that work, and in some seeds to
// images that fail at once), scales them, and drains, pauses and activates nodes. It reads the
// committed state (a linearizable read) and writes through the leader with the real planning
// code (planApply, toTransactions), as `shoal apply` and `shoal node drain` do. Its own record
// of availability is the checkers' ground truth.
//
// From its own stream it also takes rebalance steps (the API's planning code: one task moved off
// the fullest node, as the service's disruption budget allows) and drains nodes for a while,
// beside its updates, so drains, updates and rebalances run together (checkers/budget.ts).
//
// In some seeds it also races the cluster (scenario.operator.race, from its own stream): when a
// leader loop's or an agent's write is on its way to the log, it writes first what that write
// read: it pauses a node the write relies on (for a few steps, then activates it again), or
// updates a service the write changes. Every such write lands between a decision's read and its
// write, where only the compare-and-set keeps the decision from taking effect (checkers/cas.ts).

import { decodeCommand, encodeCommand } from '../../fsm/index.ts';
import { planApply } from '../../src/control/apply.ts';
import { planJobApply } from '../../src/control/job-apply.ts';
import { jobsCollection } from '../../src/resources/jobs.ts';
import { planRebalance, rebalancePlan } from '../../src/api/rebalance.ts';
import { toTransactions, type Plan } from '../../src/resources/changes.ts';
import { nodesCollection, servicesCollection } from '../../src/resources/collections.ts';
import type { Availability, NodeRecord } from '../../src/resources/records.ts';
import { parseSpecObjects, type ServiceSpec } from '../../src/resources/spec/index.ts';
import { ControlStateReader } from '../../src/resources/state.ts';
import type { SeededPrng } from '../../src/raft/prng.ts';
import { tookEffect, type LogEntry, type Proposal } from './log-entry.ts';
import type { ServicePlan } from './scenario.ts';
import type { World } from './world.ts';

const badKinds = ['crash', 'nostart', 'absent'] as const;

interface Intent {
  plan: ServicePlan;
  replicas: number;
  version: number;
  bad: (typeof badKinds)[number] | null;
}

export class Operator {
  private readonly intents = new Map<string, Intent>();
  private created = false;
  private jobTries = 0;
  private readonly reader: ControlStateReader;
  /** Nodes the racer paused, and the step it activates each again. */
  private readonly unpauseAt = new Map<string, number>();
  /** Nodes drained for a while (scenario.operator.drain), and the step each is activated again. */
  private readonly undrainAt = new Map<string, number>();

  constructor(private readonly world: World, private readonly prng: SeededPrng, private readonly racePrng: SeededPrng, private readonly movePrng: SeededPrng) {
    for (const plan of world.scenario.services) this.intents.set(plan.name, { plan, replicas: plan.replicas, version: 1, bad: null });
    this.reader = new ControlStateReader(world.reference.store);
  }

  onStep(): void {
    if (!this.created) {
      this.created = this.applySpecs('create', [...this.intents.values()]);
      return;
    }
    this.maybeCreateJob();
    const r = this.world.scenario.operator;
    if (this.prng.chance(r.update)) this.update();
    if (r.scale > 0 && this.prng.chance(r.scale)) this.scale();
    if (r.availability > 0 && this.prng.chance(r.availability)) this.changeAvailability();
    this.unpause();
    if (r.race > 0) this.race();
    if (r.rebalance > 0 && this.movePrng.chance(r.rebalance)) this.rebalance();
    if (r.drain > 0 && this.movePrng.chance(r.drain)) this.drainForAWhile();
    this.undrain();
  }

  /** One rebalance step of a service, as `shoal service rebalance` takes it (no --force). */
  private rebalance(): void {
    const all = [...this.intents.values()];
    const name = (all[this.movePrng.nextInt(all.length)] as Intent).plan.name;
    const state = this.reader.read();
    const s = state.services.get(name);
    if (s === undefined) return;
    const plan = rebalancePlan(state, s, planRebalance(state, s.value), this.world.now(), 'operator');
    if (plan === null) return;
    const written = this.write(`rebalance ${name}`, plan);
    if (written?.some((e) => tookEffect(e.result)) === true) this.world.stats.rebalances++;
  }

  /** Drains an active node for some steps (as `shoal node drain --detach`), then activates it. */
  private drainForAWhile(): void {
    const active = this.world.nodes.filter((n) => this.world.availability.get(n.id) === 'active');
    if (active.length === 0) return;
    const n = active[this.movePrng.nextInt(active.length)];
    if (n === undefined || !this.setAvailability(n.id, 'drain')) return;
    this.unpauseAt.delete(n.id);
    this.undrainAt.set(n.id, this.world.step + 10 + this.movePrng.nextInt(60));
  }

  private undrain(): void {
    for (const [id, at] of this.undrainAt) {
      if (this.world.step < at) continue;
      if (this.world.availability.get(id) !== 'drain' || this.setAvailability(id, 'active')) this.undrainAt.delete(id);
    }
  }

  /** Writes first what a decision on its way to the log read (see the top of this file). */
  private race(): void {
    const open = this.world.consensus.pending.filter((p) => p.origin.kind === 'loop' || p.origin.kind === 'agent');
    if (open.length === 0 || !this.racePrng.chance(this.world.scenario.operator.race)) return;
    const read = readBy(open[this.racePrng.nextInt(open.length)] as Proposal);
    const nodes = read.nodes.filter((id) => this.world.availability.get(id) === 'active');
    const services = read.services.filter((name) => this.intents.has(name));
    if (nodes.length + services.length === 0) return;
    const k = this.racePrng.nextInt(nodes.length + services.length);
    const node = nodes[k];
    if (node !== undefined) {
      if (!this.setAvailability(node, 'pause', 'race: ')) return;
      this.unpauseAt.set(node, this.world.step + 2 + this.racePrng.nextInt(10));
    } else {
      const intent = this.intents.get(services[k - nodes.length] as string) as Intent;
      intent.version++;
      intent.bad = null;
      this.world.stats.updates++;
      if (!this.applySpecs(`race: update ${intent.plan.name} to ${imageOf(intent)}`, [intent])) return;
    }
    this.world.stats.races++;
  }

  /** Activates again the nodes the racer paused, once their time has come (unless the operator changed them since). */
  private unpause(): void {
    for (const [id, at] of this.unpauseAt) {
      if (this.world.step < at) continue;
      if (this.world.availability.get(id) !== 'pause' || this.setAvailability(id, 'active', 'race: ')) this.unpauseAt.delete(id);
    }
  }

  /**
   * For the liveness phase: every node active, and every service back to a spec that can
   * converge (a working image and its planned replicas) unless it already runs one. Returns
   * false while it could not write (no leader).
   */
  heal(): boolean {
    this.unpauseAt.clear();
    this.undrainAt.clear();
    for (const n of this.world.nodes) {
      if (this.world.availability.get(n.id) !== 'active' && !this.setAvailability(n.id, 'active')) return false;
    }
    const state = this.reader.read();
    const fix: Intent[] = [];
    for (const intent of this.intents.values()) {
      const svc = state.services.get(intent.plan.name)?.value;
      const st = svc?.updateStatus.state;
      const broken = svc === undefined || isBadImage(svc.spec.image) || svc.spec.replicas !== intent.plan.replicas || st === 'paused' || st === 'rollback-paused';
      if (!broken) continue;
      intent.version++;
      intent.bad = null;
      intent.replicas = intent.plan.replicas;
      fix.push(intent);
    }
    return fix.length === 0 || this.applySpecs('heal', fix);
  }

  private update(): void {
    const intent = this.pickService();
    intent.version++;
    intent.bad = this.prng.chance(this.world.scenario.operator.badImage) ? badKinds[this.prng.nextInt(badKinds.length)] as Intent['bad'] : null;
    this.world.stats.updates++;
    if (intent.bad !== null) this.world.stats.badUpdates++;
    this.applySpecs(`update ${intent.plan.name} to ${imageOf(intent)}`, [intent]);
  }

  private scale(): void {
    const intent = this.pickService();
    intent.replicas = this.prng.nextInt(intent.plan.replicas + 3);
    // A service with a replicated volume runs one task at most (its one writer).
    if (intent.plan.fields.mounts !== undefined) intent.replicas = Math.min(intent.replicas, 1);
    this.world.stats.scales++;
    this.applySpecs(`scale ${intent.plan.name} to ${intent.replicas}`, [intent]);
  }

  private changeAvailability(): void {
    const n = this.world.nodes[this.prng.nextInt(this.world.nodes.length)];
    if (n === undefined) return;
    const to: Availability = (['drain', 'pause', 'active', 'active'] as const)[this.prng.nextInt(4)] as Availability;
    if (to === this.world.availability.get(n.id)) return;
    if (this.setAvailability(n.id, to)) this.unpauseAt.delete(n.id);
  }

  private pickService(): Intent {
    const all = [...this.intents.values()];
    return all[this.prng.nextInt(all.length)] as Intent;
  }

  /** `shoal apply` of the scenario's job, until the committed store has it (every 30 steps). */
  private maybeCreateJob(): void {
    const plan = this.world.scenario.job;
    if (plan === null || this.world.reference.store.get(jobsCollection, plan.name) !== undefined) return;
    if (this.jobTries++ % 30 !== 0) return;
    const spec = parseSpecObjects([{
      apiVersion: 'shoal/v1', kind: 'Job', name: plan.name, image: 'chore/x:1', schedule: `@every ${plan.everyMs}ms`, concurrency: plan.concurrency,
      backoffLimit: 2, history: { succeeded: 2, failed: 2 },
    }]).jobs;
    this.write(`create job ${plan.name}`, planJobApply(this.reader.read(), spec, this.world.now()).plan);
  }

  /** `shoal apply` of the intents' specs; false when nothing could be written (no leader). */
  private applySpecs(what: string, intents: Intent[]): boolean {
    const specs = intents.map(specOf);
    const state = this.reader.read();
    const before = new Map(specs.map((s) => [s.name, state.services.get(s.name)?.value.spec.replicas ?? 0]));
    const { plan } = planApply(state, specs, this.world.now());
    const written = this.write(what, plan);
    if (written === null) return false;
    for (const e of written) {
      if (!tookEffect(e.result)) continue;
      for (const s of specs) {
        const old = before.get(s.name) ?? 0;
        if ((s.replicas ?? 0) < old) this.world.pendingReplicas.set(s.name, [...(this.world.pendingReplicas.get(s.name) ?? []), { index: e.index, replicas: old }]);
      }
    }
    return true;
  }

  private setAvailability(nodeId: string, to: Availability, why = ''): boolean {
    const doc = this.world.reference.store.get(nodesCollection, nodeId);
    if (doc === undefined) return false;
    const rec = doc.doc as unknown as NodeRecord;
    const e = this.appendOne(`${why}${to} ${nodeId}`, { op: 'put', collection: nodesCollection, id: nodeId, doc: { ...rec, availability: to } as never, expect: { rev: doc.rev } });
    if (e === null || !tookEffect(e.result)) return false;
    this.world.availability.set(nodeId, to);
    if (to === 'drain') {
      this.world.everDrained.add(nodeId);
      this.world.stats.drains++;
    }
    return true;
  }

  private write(what: string, plan: Plan): LogEntry[] | null {
    const out: LogEntry[] = [];
    for (const txn of toTransactions(plan)) {
      const e = this.appendOne(what, txn);
      if (e === null) return out.length === 0 ? null : out;
      out.push(e);
    }
    return out;
  }

  private appendOne(what: string, cmd: Parameters<typeof encodeCommand>[0]['cmd']): LogEntry | null {
    return this.world.consensus.appendClient(encodeCommand({ cmd, ts: this.world.now(), principal: 'operator' }), { kind: 'operator', what });
  }
}

function imageOf(i: Intent): string {
  return i.bad === null ? `app:v${i.version}` : `${i.bad}/app:v${i.version}`;
}

function isBadImage(image: string): boolean {
  return badKinds.some((k) => image.startsWith(`${k}/`));
}

function specOf(i: Intent): ServiceSpec {
  const doc = { apiVersion: 'shoal/v1', kind: 'Service', name: i.plan.name, image: imageOf(i), replicas: i.replicas, ...i.plan.fields, env: { REVISION: String(i.version) } };
  const parsed = parseSpecObjects([doc]);
  const spec = parsed.services[0];
  if (spec === undefined) throw new Error(`the simulator's spec for ${i.plan.name} does not parse: ${JSON.stringify(parsed)}`);
  return spec;
}

/** The nodes and services a write on its way to the log read: what it writes, and what its compares name. */
function readBy(p: Proposal): { nodes: string[]; services: string[] } {
  const cmd = decodeCommand(p.data).cmd;
  const docs = cmd.op === 'txn' ? [...cmd.success, ...cmd.compare] : cmd.op === 'retain' || cmd.op === 'compact' ? [] : [cmd];
  const ids = (collection: string): string[] => [...new Set(docs.filter((d) => d.collection === collection).map((d) => d.id))].sort();
  return { nodes: ids(nodesCollection), services: ids(servicesCollection) };
}
