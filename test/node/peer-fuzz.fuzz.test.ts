// Property tests: what a peer sends cannot stop a node. A three-node in-memory cluster runs
// under a write load while its transports' inputs get (fast-check arbitraries,
// test/transport/fuzz-messages.ts):
//
//   1. hostile frames: garbage, malformed and meaningless messages, corrupted frames, frames the
//      connection does not carry, batches of them, and well-formed messages of a past term. The
//      cluster must keep committing, every node stay up, and the drops be counted.
//   2. admitted lies: well-formed, meaningful messages of any type but a proposal, with terms
//      and indexes around the receiver's, as if from a confused or hostile member. Raft trusts
//      its members, so such messages may stall replication to a node; none may stop one.
//   3. arbitrary bytes as proposals, made on any node and forwarded by peers as 'prop'
//      messages. The cluster must keep committing and every node stay up.
//
// SHOAL_FUZZ_RUNS sets the runs per property (default 3, `npm run test:fuzz` runs more). A
// failure prints fast-check's seed and path; `fc.assert` replays them with { seed, path }, and
// SHOAL_FUZZ_SHRINK=1 shrinks the counterexample (slow: each try runs a cluster).

import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeSnapshotData } from '../../src/node/snapshot-data.ts';
import {
  buildValid, classify, hostileRecipeArb, render, validRecipeArb, type Recipe, type Route, type ValidRecipe,
} from '../transport/fuzz-messages.ts';
import { KvStateMachine } from './kv-state-machine.ts';
import { MemoryCluster, type TestNode } from './memory-cluster.ts';

const runs = Number(process.env.SHOAL_FUZZ_RUNS ?? 3);
/** Shrinking reruns whole clusters, minutes of it: only when asked (SHOAL_FUZZ_SHRINK=1). */
const params = { numRuns: runs, endOnFailure: process.env.SHOAL_FUZZ_SHRINK !== '1' };
/** How long the cluster gets to commit a write on every node after the inputs: a liveness bound, not a speed. */
const settleMs = 10_000;

interface Input<R> {
  node: number;
  peer: number;
  recipe: R;
}
const inputArb = <R>(recipe: fc.Arbitrary<R>): fc.Arbitrary<Input<R>> =>
  fc.record({ node: fc.nat({ max: 2 }), peer: fc.nat({ max: 1 }), recipe });

/** The writes of a closed-loop client that always asks the node it takes for the leader. */
class Writer {
  committed = 0;
  private running = true;
  private readonly done: Promise<void>;

  constructor(cluster: MemoryCluster) {
    this.done = (async () => {
      for (let i = 0; this.running; i++) {
        const leader = cluster.nodes.find((n) => n.node.isLeader && n.node.failure === undefined);
        try {
          if (leader === undefined) throw new Error('no leader');
          await leader.node.propose(KvStateMachine.encode({ op: 'put', key: `w${i % 16}`, value: String(i) }));
          this.committed++;
          // A client's next request is a new task, as over HTTP. Without it a leader that is its
          // only voter (a lie can make it so) commits and applies in microtasks alone, and the
          // timers of everything else never run.
          await new Promise((r) => setImmediate(r));
        } catch {
          await new Promise((r) => setTimeout(r, 10));
        }
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }
}

describe('a cluster fed what peers could send', { timeout: 120_000 }, () => {
  let cluster: MemoryCluster | undefined;
  afterEach(async () => {
    await cluster?.stopAll();
    cluster = undefined;
  });

  async function started(): Promise<MemoryCluster> {
    cluster = new MemoryCluster({ snapshotEntries: 50, logKeepEntries: 20 });
    await cluster.start();
    await cluster.waitForLeader();
    return cluster;
  }

  function routeOf(c: MemoryCluster, input: { node: number; peer: number }): { target: TestNode; route: Route } {
    const target = c.nodes[input.node] as TestNode;
    const others = c.nodes.filter((n) => n !== target);
    const from = (others[input.peer] as TestNode).id;
    const members = c.nodes.map((n) => n.id);
    const snapshotData = encodeSnapshotData({ members: c.members, featureLevel: 1, removed: [] }, [new KvStateMachine().snapshot()]);
    return { target, route: { from, to: target.id, members, term: target.node.currentTerm, snapshotData } };
  }

  /** Every node up and no error logged; a new write committed and applied on every node. */
  async function expectServing(c: MemoryCluster): Promise<void> {
    expect(c.errors).toEqual([]);
    for (const n of c.nodes) expect(n.node.failure, `${n.id} failed`).toBeUndefined();
    const deadline = Date.now() + settleMs;
    for (;;) {
      const leader = c.nodes.find((n) => n.node.isLeader);
      const done = leader === undefined ? undefined
        : await leader.node.propose(KvStateMachine.encode({ op: 'put', key: 'final', value: 'v' })).catch(() => undefined);
      if (done !== undefined && await appliedEverywhere(c, done.index, deadline)) return;
      if (Date.now() > deadline) throw new Error(`no write committed on every node within ${settleMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async function appliedEverywhere(c: MemoryCluster, index: number, deadline: number): Promise<boolean> {
    while (Date.now() <= deadline) {
      if (c.nodes.every((n) => n.node.appliedIndex >= index)) return true;
      await new Promise((r) => setTimeout(r, 10));
    }
    return false;
  }

  /** Lets the cluster run between inputs: the inputs arrive while it works. */
  const breathe = (i: number): Promise<void> => (i % 8 === 7 ? new Promise((r) => setTimeout(r, 1)) : Promise.resolve());

  it('keeps committing, every node up, under hostile frames, and counts what it drops', async () => {
    await fc.assert(fc.asyncProperty(fc.array(inputArb<Recipe>(hostileRecipeArb()), { minLength: 50, maxLength: 300 }), async (inputs) => {
      const c = await started();
      const writer = new Writer(c);
      let dropped = 0;
      for (const [i, input] of inputs.entries()) {
        const { target, route } = routeOf(c, input);
        const bytes = render(input.recipe, route);
        // Only what a correct cluster must shrug off: an admitted message may be a lie.
        const fate = classify(bytes, route);
        if (fate === 'admitted') continue;
        const transport = c.transports.get(target.id);
        const fates = transport?.injectBytes(route.from, bytes) ?? [];
        if (fate === 'dropped') {
          expect(fates.some((f) => f !== undefined), `dropped: ${JSON.stringify(input.recipe).slice(0, 200)}`).toBe(true);
          dropped++;
        }
        await breathe(i);
      }
      await writer.stop();
      await expectServing(c);
      const counted = c.nodes.reduce((sum, n) => sum + Object.values(c.transports.get(n.id)?.inboundDrops() ?? {}).reduce((a, b) => a + b, 0), 0);
      expect(counted).toBeGreaterThanOrEqual(dropped);
      await c.stopAll();
    }), params);
  });

  it('stays up, every node, under well-formed lies of every type but a proposal', async () => {
    // Appended entries are empty (no-ops): the state machine's handling of arbitrary entry bytes
    // is the third property's; this one is about the core.
    const lie = validRecipeArb.filter((r) => r.type !== 'prop').map((r) => ({ ...r, entries: r.entries.map((e) => ({ ...e, data: new Uint8Array(0) })) }));
    await fc.assert(fc.asyncProperty(fc.array(inputArb<ValidRecipe>(lie), { minLength: 50, maxLength: 300 }), async (inputs) => {
      const c = await started();
      const writer = new Writer(c);
      let admitted = 0;
      for (const [i, input] of inputs.entries()) {
        const { target, route } = routeOf(c, input);
        const fate = c.transports.get(target.id)?.injectValue(route.from, buildValid(input.recipe, route));
        if (fate === undefined) admitted++;
        await breathe(i);
      }
      await writer.stop();
      expect(admitted, 'the lies reached the cores').toBeGreaterThan(inputs.length / 2);
      expect(c.errors).toEqual([]);
      for (const n of c.nodes) expect(n.node.failure, `${n.id} failed`).toBeUndefined();
      await c.stopAll();
    }), params);
  });

  it('keeps committing, every node up, with arbitrary bytes proposed on nodes and forwarded by peers', async () => {
    const proposal = fc.record({ node: fc.nat({ max: 2 }), peer: fc.nat({ max: 1 }), viaPeer: fc.boolean(), data: fc.uint8Array({ maxLength: 64 }) });
    await fc.assert(fc.asyncProperty(fc.array(proposal, { minLength: 10, maxLength: 60 }), async (props) => {
      const c = await started();
      const writer = new Writer(c);
      const pending: Promise<unknown>[] = [];
      for (const [i, p] of props.entries()) {
        const { target, route } = routeOf(c, p);
        if (p.viaPeer) {
          // A peer's forwarded proposal: its entries go into the log as they are, with no envelope.
          const base = fc.sample(validRecipeArb, { seed: i, numRuns: 1 })[0] as ValidRecipe;
          const m = buildValid({ ...base, type: 'prop', entries: [{ bump: 0, data: p.data }] }, route);
          c.transports.get(target.id)?.injectValue(route.from, m);
        } else {
          pending.push(target.node.propose(p.data).catch(() => undefined));
        }
        await breathe(i);
      }
      await Promise.all(pending);
      await writer.stop();
      await expectServing(c);
      await c.stopAll();
    }), params);
  });
});

