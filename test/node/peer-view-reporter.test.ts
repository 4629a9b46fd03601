// A node's peer view (src/node/peer-view-reporter.ts): the members it has not heard from for
// unheardAfterMs, written through the log only when that list changes, never before the node has
// listened that long, one write at a time and at most one a second, tried again when one fails.

import { describe, expect, it } from 'vitest';
import { DocumentStore } from '../../fsm/index.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { PeerViewReporter, peerViewUnheardAfterMs, unheardAfterMsMin } from '../../src/node/peer-view-reporter.ts';
import { controlFeatureLevel } from '../../src/resources/collections.ts';
import { peerViewsCollection, readPeerViews } from '../../src/resources/peer-views.ts';
import type { ProposalResult } from '../../src/ports/proposer.ts';
import { allDocs } from '../../src/resources/state.ts';

function setup() {
  const clock = new ManualClock(0);
  const store = new DocumentStore();
  const heardAt = new Map<string, number>([['n2', 0], ['n3', 0]]);
  let index = 0;
  const o = { fail: false, halted: false, level: controlFeatureLevel, proposals: 0 };
  const reporter = new PeerViewReporter({
    self: 'n1', store, members: () => ['n1', 'n2', 'n3'],
    heardAgoMs: (id) => { const at = heardAt.get(id); return at === undefined ? undefined : clock.now() - at; },
    featureLevel: () => { if (o.halted) throw new Error('the node was removed'); return o.level; },
    propose: (data) => (o.halted ? (() => { throw new Error('the node was removed'); })() : proposeNow(data)),
    clock, log: { debug: () => {}, info: () => {} }, unheardAfterMs: 1_500,
  });
  async function proposeNow(data: Uint8Array): Promise<ProposalResult> {
    o.proposals++;
    await Promise.resolve();
    if (o.fail) throw new Error('no leader');
    const result = store.apply({ index: ++index, term: 1, data, logTimeMs: clock.now(), featureLevel: controlFeatureLevel });
    return { index, result };
  }
  const view = (): string[] | undefined => {
    const v = readPeerViews(allDocs(store, peerViewsCollection)).get('n1');
    return v === undefined ? undefined : [...v].sort();
  };
  const run = async (ms: number): Promise<void> => {
    for (let t = 0; t < ms; t += 50) {
      clock.advance(50);
      for (let i = 0; i < 5; i++) await Promise.resolve();
    }
  };
  /** Both peers heard just now (their pings keep coming). */
  const hearAll = (): void => { for (const id of heardAt.keys()) heardAt.set(id, clock.now()); };
  return { clock, store, heardAt, o, reporter, view, run, hearAll };
}

describe('the peer view reporter', () => {
  it('keeps quiet when its node halted and throws from its calls (no uncaught exception from its timer)', async () => {
    const s = setup();
    s.reporter.start();
    s.o.halted = true;
    for (let i = 0; i < 20; i++) { s.hearAll(); await s.run(100); }
    expect(s.view()).toBeUndefined();
    s.reporter.close();
  });

  it('writes nothing before it has listened for unheardAfterMs, then its view once, and again only when it changes', async () => {
    const s = setup();
    s.reporter.start();
    expect(s.reporter.unheardNow()).toBeNull();
    for (let i = 0; i < 20; i++) { s.hearAll(); await s.run(100); }
    expect(s.view()).toEqual([]);
    expect(s.o.proposals).toBe(1);
    // n3 goes quiet: named unheard once 1.5 s have passed without it, and written once.
    for (let i = 0; i < 30; i++) { s.heardAt.set('n2', s.clock.now()); await s.run(100); }
    expect(s.view()).toEqual(['n3']);
    expect(s.o.proposals).toBe(2);
    // Heard again: the list empties.
    for (let i = 0; i < 20; i++) { s.hearAll(); await s.run(100); }
    expect(s.view()).toEqual([]);
    expect(s.o.proposals).toBe(3);
  });

  it('writes at most once a second while a link flaps, and tries again after a failed write', async () => {
    const s = setup();
    s.reporter.start();
    for (let i = 0; i < 20; i++) { s.hearAll(); await s.run(100); }
    const before = s.o.proposals;
    // n3 heard every other 1.6 s: unheard, heard, unheard... for 8 s.
    for (let t = 0; t < 8_000; t += 100) {
      s.heardAt.set('n2', s.clock.now());
      if (t % 3_200 === 1_600) s.heardAt.set('n3', s.clock.now());
      await s.run(100);
    }
    expect(s.o.proposals - before).toBeLessThanOrEqual(9);
    for (let i = 0; i < 20; i++) { s.hearAll(); await s.run(100); }
    expect(s.view()).toEqual([]);
    s.o.fail = true;
    for (let i = 0; i < 30; i++) { s.heardAt.set('n2', s.clock.now()); await s.run(100); }
    expect(s.view()).toEqual([]);
    const failed = s.o.proposals;
    expect(failed).toBeGreaterThan(before);
    s.o.fail = false;
    for (let i = 0; i < 15; i++) { s.heardAt.set('n2', s.clock.now()); await s.run(100); }
    expect(s.o.proposals).toBeGreaterThan(failed);
    expect(s.view()).toEqual(['n3']);
  });

  it('while every member is heard, checks only when the least recently heard one would turn unheard, and sees that silence on time', async () => {
    const s = setup();
    let checks = 0;
    const level = s.o.level;
    Object.defineProperty(s.o, 'level', { get: () => { checks++; return level; } });
    s.reporter.start();
    for (let i = 0; i < 20; i++) { s.hearAll(); await s.run(100); }
    expect(s.view()).toEqual([]);
    // 10 s with both peers heard every 100 ms: each check finds the next silence 1.4-1.5 s away
    // (checking every 250 ms made 40 checks).
    checks = 0;
    for (let i = 0; i < 100; i++) { s.hearAll(); await s.run(100); }
    expect(checks).toBeLessThanOrEqual(8);
    // n3 goes quiet: its silence is written once it reaches 1.5 s, not a check period later.
    s.heardAt.set('n3', s.clock.now());
    for (let t = 0; t < 1_500; t += 50) { s.heardAt.set('n2', s.clock.now()); await s.run(50); }
    expect(s.view()).toEqual(['n3']);
    s.reporter.close();
  });

  it('writes nothing below the control plane\'s feature level; its threshold is never under 1.5 s', async () => {
    const s = setup();
    s.o.level = controlFeatureLevel - 1;
    s.reporter.start();
    await s.run(5_000);
    expect(s.o.proposals).toBe(0);
    s.reporter.close();
    expect(peerViewUnheardAfterMs({ suspectAfterMs: 500 })).toBe(unheardAfterMsMin);
    expect(peerViewUnheardAfterMs({ suspectAfterMs: 2_500 })).toBe(2_500);
  });
});
