// The cluster's events on in-memory nodes: cluster events written through Raft and seen the same
// on every node, node-local ones in each node's ring, the bounded window, and what happens when
// a cluster event cannot be written.

import { afterEach, describe, expect, it } from 'vitest';
import { DocumentStore } from '../../fsm/index.ts';
import { EventLog, eventsCollection, matchesTypes, type ClusterEvent } from '../../src/node/events/event-log.ts';
import { watchNodeEvents } from '../../src/node/events/event-sources.ts';
import { silentLogger } from '../../src/log.ts';
import { MemoryCluster, type TestNode } from '../node/memory-cluster.ts';
import { waitFor } from '../transport/helpers.ts';

interface Watched {
  t: TestNode;
  events: EventLog;
  stop: () => void;
}

let cluster: MemoryCluster | undefined;
let watched: Watched[] = [];
afterEach(async () => {
  for (const w of watched) { w.stop(); w.events.close(); }
  watched = [];
  await cluster?.stopAll();
  cluster = undefined;
});

async function start(opts: { retainedMax?: number } = {}): Promise<{ c: MemoryCluster; leader: Watched; follower: Watched }> {
  const c = new MemoryCluster({ stateMachine: () => new DocumentStore() });
  cluster = c;
  await c.start();
  watched = c.nodes.map((t) => {
    const member = c.members.find((m) => m.id === t.id);
    const events = new EventLog({ node: t.node, store: t.sm as DocumentStore, identity: { id: t.id, name: member?.name ?? t.id }, log: silentLogger, ...opts });
    return { t, events, stop: watchNodeEvents(t.node, events, { pollMs: 10, unreachableAfterMs: 50 }) };
  });
  const leaderNode = await c.waitForLeader();
  const leader = watched.find((w) => w.t === leaderNode) as Watched;
  const follower = watched.find((w) => w !== leader) as Watched;
  return { c, leader, follower };
}

const types = (evs: ClusterEvent[]): string[] => evs.map((e) => e.type);

describe('cluster events', () => {
  it('are written through Raft by any node and read the same on every node, in cursor order', async () => {
    const { leader, follower } = await start();
    follower.events.recordEvent('test.recorded', 'thing-1', { n: 1 });
    leader.events.recordEvent('test.recorded', 'thing-2', { n: 2 });
    for (const w of watched) await waitFor('both events on every node', () => w.events.clusterSince(0, ['test']).length === 2, 5000);
    const seen = watched.map((w) => w.events.clusterSince(0, ['test']));
    expect(seen[1]).toEqual(seen[0]);
    expect(seen[2]).toEqual(seen[0]);
    const [a, b] = seen[0] as ClusterEvent[];
    expect(a?.cursor).toBeLessThan(b?.cursor ?? 0);
    expect(new Set([a?.subject, b?.subject])).toEqual(new Set(['thing-1', 'thing-2']));
    const fromFollower = seen[0]?.find((e) => e.subject === 'thing-1');
    expect(fromFollower).toMatchObject({ scope: 'cluster', type: 'test.recorded', node: follower.t.id, details: { n: 1 } });
    // After a cursor: only what came later.
    expect(leader.events.clusterSince(a?.cursor ?? 0, ['test']).map((e) => e.cursor)).toEqual([b?.cursor]);
  });

  it('include the leader elected, once, recorded by the leader', async () => {
    const { leader, follower } = await start();
    await waitFor('leader.elected', () => follower.events.clusterSince(0, ['leader.elected']).length > 0, 5000);
    const elected = follower.events.clusterSince(0, ['leader.elected']);
    expect(elected).toHaveLength(1);
    expect(elected[0]).toMatchObject({ subject: leader.t.id, node: leader.t.id, term: leader.t.node.currentTerm, details: { term: leader.t.node.currentTerm } });
  });

  it('say when the leader loses a member and gets it back, and each node keeps its own view locally', async () => {
    const { c, leader, follower } = await start();
    const other = watched.find((w) => w !== leader && w !== follower) as Watched;
    c.network.partition(leader.t.id, follower.t.id);
    await waitFor('member.unreachable from the leader', () => other.events.clusterSince(0, ['member.unreachable']).length > 0, 5000);
    expect(other.events.clusterSince(0, ['member.unreachable'])[0]).toMatchObject({ subject: follower.t.id, node: leader.t.id });
    expect(leader.events.localSince(0, ['member'])[0]).toMatchObject({ scope: 'local', type: 'member.unreachable', subject: follower.t.id });
    c.network.heal();
    await waitFor('member.back', () => other.events.clusterSince(0, ['member.back']).length > 0, 5000);
    expect(types(leader.events.localSince(0, ['member']))).toEqual(['member.unreachable', 'member.back']);
  });

  it('are kept on the recording node, marked unrecorded, when they cannot be written', async () => {
    const { c, follower } = await start();
    c.network.isolate(follower.t.id);
    await waitFor('the follower to lose its leader', () => follower.t.node.leaderId === '', 5000);
    follower.events.recordEvent('test.recorded', 'lonely');
    await waitFor('the event in the ring', () => follower.events.localSince(0, ['test']).length === 1, 5000);
    expect(follower.events.localSince(0, ['test'])[0]).toMatchObject({ scope: 'local', subject: 'lonely', details: { unrecorded: expect.stringContaining('no leader') as unknown } });
  });

  it('are kept for a bounded window: the leader deletes the oldest', async () => {
    const { leader } = await start({ retainedMax: 10 });
    for (let i = 0; i < 30; i++) leader.events.recordEvent('test.recorded', `e${i}`);
    await waitFor('the newest event applied', () => leader.events.clusterSince(0, ['test']).some((e) => e.subject === 'e29'), 5000);
    await waitFor('the window trimmed', () => leader.events.clusterSince(0).length <= 11, 5000);
    const kept = leader.events.clusterSince(0, ['test']).map((e) => e.subject);
    expect(kept.at(-1)).toBe('e29');
    expect(kept).not.toContain('e0');
    expect((leader.t.sm as DocumentStore).list(eventsCollection, { limit: 1000 }).items.length).toBeLessThanOrEqual(11);
  });

  it('refuse a type that is not dotted lower-case words', async () => {
    const { leader } = await start();
    expect(() => leader.events.recordEvent('Leader Elected', 'x')).toThrow(/dotted lower-case/);
    expect(() => leader.events.recordLocal('leader', 'x')).toThrow(/dotted lower-case/);
  });
});

describe('node-local events', () => {
  it('record leader changes in every node\'s ring, with cursors that only grow', async () => {
    const { c, leader } = await start();
    for (const w of watched) await waitFor('leader.changed', () => w.events.localSince(0, ['leader.changed']).length > 0, 5000);
    c.network.isolate(leader.t.id);
    const others = watched.filter((w) => w !== leader);
    for (const w of others) await waitFor('a second leader.changed', () => w.events.localSince(0, ['leader.changed']).some((e) => e.details.previous === leader.t.id), 5000);
    const mine = others[0]?.events.localSince(0) ?? [];
    expect(mine.map((e) => e.cursor)).toEqual([...mine.map((e) => e.cursor)].sort((a, b) => a - b));
    const last = mine.at(-1)?.cursor ?? 0;
    expect(others[0]?.events.localSince(last)).toEqual([]);
  });
});

describe('type filters', () => {
  it('match a type and the types under it, and nothing else', () => {
    expect(matchesTypes('member.added', [])).toBe(true);
    expect(matchesTypes('member.added', ['member'])).toBe(true);
    expect(matchesTypes('member.added', ['member.added'])).toBe(true);
    expect(matchesTypes('member.added', ['member.removed', 'leader'])).toBe(false);
    expect(matchesTypes('membership.added', ['member'])).toBe(false);
  });
});
