// The node's event sources (src/node/events/event-sources.ts) poll when the node says something
// may have changed, not once a second (issue 45): a peer's connection closing is recorded with no
// timer advanced (fake timers), and an idle, healthy node polls once per sweep.

import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { watchNodeEvents } from '../../../src/node/events/event-sources.ts';

function fakeNode() {
  const n = Object.assign(new EventEmitter(), {
    id: 'n1', isLeader: true, currentTerm: 2, featureLevel: 1, latestSnapshotIndex: 0, failure: undefined,
    snapshotDuration: { count: 0 }, polls: 0, connected: true,
    confState: () => { n.polls++; return { voters: ['n1', 'n2'], learners: [], learnersNext: [], votersOutgoing: [] }; },
    membership: { list: () => [{ id: 'n1', name: 'a' }, { id: 'n2', name: 'b' }] },
    peerStats: () => [{ id: 'n2', connected: n.connected }],
  });
  return n;
}

describe('node event sources', () => {
  beforeEach(() => { vi.useFakeTimers(); });
  afterEach(() => { vi.useRealTimers(); });

  it('record a peer\'s connection closing at once, and poll an idle healthy node once per sweep', async () => {
    const node = fakeNode();
    const local: string[] = [];
    const events = { recordLocal: (type: string) => { local.push(type); }, recordEvent: () => {} };
    const stop = watchNodeEvents(node as never, events as never, { pollMs: 1_000, sweepMs: 10_000, unreachableAfterMs: 0 });
    await vi.advanceTimersByTimeAsync(1_000);
    const first = node.polls;
    await vi.advanceTimersByTimeAsync(20_000);
    expect(node.polls - first).toBe(2);
    node.connected = false;
    node.emit('peerDisconnected', 'n2');
    for (let i = 0; i < 5; i++) await Promise.resolve();
    expect(local).toEqual(['member.unreachable']);
    stop();
  });
});
