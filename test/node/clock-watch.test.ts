// The clock rule on a node (src/node/clock-watch.ts, clock-sync.ts): the report of the members'
// clocks, the leader's hold with its start and end told once each, and the synchronization
// status read from timedatectl's answer.

import { describe, expect, it, vi } from 'vitest';
import { ClockWatch } from '../../src/node/clock-watch.ts';
import { ClockSyncStatus, parseNtpSynchronized } from '../../src/node/clock-sync.ts';
import type { PeerContact } from '../../src/ports/leadership.ts';

function setup() {
  const node = {
    id: 'n1', isLeader: true,
    offsets: new Map<string, number | undefined>([['n2', -47_000], ['n3', -46_000]]),
    peerContact(id: string): PeerContact {
      const o = this.offsets.get(id);
      return { heardAgoMs: 0, watchingForMs: 1_000, link: 'connected', goodbye: false, refused: false, ...(o === undefined ? {} : { clockOffsetMs: o, clockSampledAgoMs: 500 }) };
    },
    confState: () => ({ voters: ['n1', 'n2', 'n3'], votersOutgoing: [], learners: ['n4'], learnersNext: [], autoLeave: false }),
  };
  const events: { type: string; details: unknown }[] = [];
  let synchronized: boolean | undefined = true;
  const watch = new ClockWatch({
    node, synchronized: () => synchronized, record: (type, _subject, details) => events.push({ type, details }), log: { info: () => {}, warn: () => {} },
  });
  return { node, events, watch, setSync: (v: boolean | undefined) => { synchronized = v; } };
}

describe('ClockWatch', () => {
  it('reports every other member\'s offset (unknown ones null), the skew and the hold', () => {
    const t = setup();
    const r = t.watch.report();
    expect(r).toMatchObject({ node: 'n1', leader: true, synchronized: true, skewMaxMs: 30_000, skewMs: 46_000 });
    expect(r.offsets).toEqual([{ node: 'n2', offsetMs: -47_000 }, { node: 'n3', offsetMs: -46_000 }, { node: 'n4', offsetMs: null }]);
    expect(r.hold).toMatch(/46 s ahead of the members' median/);
  });

  it('a leader\'s hold: one event when it starts, none while it lasts, one when it ends', () => {
    const t = setup();
    expect(t.watch.jobClockHold()).toMatch(/ahead/);
    expect(t.watch.jobClockHold()).toMatch(/ahead/);
    expect(t.watch.holding).toBe(true);
    expect(t.events.map((e) => e.type)).toEqual(['job.clock_held']);
    expect(t.events[0]?.details).toMatchObject({ skewMs: 46_000, synchronized: true });
    t.node.offsets = new Map([['n2', 100], ['n3', -200]]);
    expect(t.watch.jobClockHold()).toBeNull();
    expect(t.watch.holding).toBe(false);
    expect(t.events.map((e) => e.type)).toEqual(['job.clock_held', 'job.clock_released']);
    t.setSync(false);
    expect(t.watch.jobClockHold()).toMatch(/not synchronized/);
    expect(t.events.map((e) => e.type)).toEqual(['job.clock_held', 'job.clock_released', 'job.clock_held']);
  });

  it('a follower holds nothing and records nothing; one that stepped down while held says nothing more', () => {
    const t = setup();
    t.node.isLeader = false;
    expect(t.watch.jobClockHold()).toBeNull();
    expect(t.watch.report().hold).not.toBeNull(); // what the rule would say, were it leading
    expect(t.events).toEqual([]);
    t.node.isLeader = true;
    t.watch.jobClockHold();
    t.node.isLeader = false;
    expect(t.watch.jobClockHold()).toBeNull();
    expect(t.watch.holding).toBe(false);
    expect(t.events.map((e) => e.type)).toEqual(['job.clock_held']);
  });
});

describe('clock synchronization status', () => {
  it('parses timedatectl\'s answer; anything else is unknown', () => {
    expect(parseNtpSynchronized('yes\n')).toBe(true);
    expect(parseNtpSynchronized('no\n')).toBe(false);
    expect(parseNtpSynchronized('')).toBeUndefined();
    expect(parseNtpSynchronized('System has not been booted with systemd')).toBeUndefined();
  });

  it('caches what the reader said; a failing reader is unknown', async () => {
    let answer: boolean | undefined | Error = false;
    const s = new ClockSyncStatus(async () => {
      if (answer instanceof Error) throw answer;
      return answer;
    });
    expect(s.synchronized).toBeUndefined();
    await s.refresh();
    expect(s.synchronized).toBe(false);
    answer = true;
    await s.refresh();
    expect(s.synchronized).toBe(true);
    answer = new Error('no bus');
    await s.refresh();
    expect(s.synchronized).toBeUndefined();
    s.close();
  });

  it('reads first a while after start, off the node\'s start, then every refresh; not after close', async () => {
    vi.useFakeTimers();
    try {
      let reads = 0;
      const s = new ClockSyncStatus(async () => { reads++; return true; }, 60_000, 1_000);
      s.start();
      await vi.advanceTimersByTimeAsync(999);
      expect(reads).toBe(0);
      expect(s.synchronized).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      expect(reads).toBe(1);
      expect(s.synchronized).toBe(true);
      await vi.advanceTimersByTimeAsync(60_000);
      expect(reads).toBe(2);
      s.close();
      await vi.advanceTimersByTimeAsync(120_000);
      expect(reads).toBe(2);
      const early = new ClockSyncStatus(async () => { reads++; return true; }, 60_000, 1_000);
      early.start();
      early.close();
      await vi.advanceTimersByTimeAsync(5_000);
      expect(reads).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });
});
