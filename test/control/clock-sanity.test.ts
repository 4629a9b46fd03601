// The jobs' clock rule (src/control/clock-sanity.ts): which leaders hold their scheduled runs.

import { describe, expect, it } from 'vitest';
import { assessClock, median, offsetsOf } from '../../src/control/clock-sanity.ts';

const limit = 30_000;
const assess = (offsets: Record<string, number>, synchronized: boolean | undefined = true) =>
  assessClock({ self: 'n1', offsets: new Map(Object.entries(offsets)), synchronized, skewMaxMs: limit });

describe('median', () => {
  it('odd and even counts', () => {
    expect(median([5])).toBe(5);
    expect(median([0, 10])).toBe(5);
    expect(median([3, -1, 0])).toBe(0);
    expect(median([9, 1, 4, 2, 7])).toBe(4);
  });
});

describe('assessClock', () => {
  it('one member (itself alone): nothing to compare, no hold', () => {
    expect(assess({})).toEqual({ hold: null, skewMs: null });
  });

  it('two members: the median is half-way, so only more than twice the limit apart holds', () => {
    expect(assess({ n2: -60_000 }).hold).toBeNull(); // 30 s from the median: at the limit
    const far = assess({ n2: -61_000 });
    expect(far.skewMs).toBe(30_500);
    expect(far.hold).toMatch(/ahead of the members' median/);
  });

  it('three members: a leader 47 s ahead holds, and the reason names the members\' clocks and what to do', () => {
    const r = assess({ n2: -47_000, n3: -46_000 });
    expect(r.skewMs).toBe(46_000);
    expect(r.hold).toBe(
      "this leader's clock is 46 s ahead of the members' median, more than the 30 s allowed (the members' clocks against it: n2 -47 s, n3 -46 s): "
      + 'fix its time (NTP: `timedatectl`, chrony or systemd-timesyncd) or hand leadership over (`shoal cluster transfer-leader`); no scheduled job fires meanwhile',
    );
  });

  it('three members: one follower far off does not hold a leader that agrees with the other', () => {
    expect(assess({ n2: 3_600_000, n3: 500 })).toEqual({ hold: null, skewMs: -500 });
  });

  it('five members: a leader behind the majority holds; the sign says behind', () => {
    const r = assess({ n2: 40_000, n3: 41_000, n4: 39_000, n5: -1_000 });
    expect(r.skewMs).toBe(-39_000);
    expect(r.hold).toMatch(/39 s behind the members' median/);
    expect(assess({ n2: 40_000, n3: 41_000, n4: 0, n5: -1_000 }).hold).toBeNull();
  });

  it('exactly at the limit does not hold; a millisecond past it does', () => {
    expect(assess({ n2: -30_000, n3: -30_000 }).hold).toBeNull();
    expect(assess({ n2: -30_001, n3: -30_001 }).hold).not.toBeNull();
  });

  it('members whose clock is unknown are left out of the median', () => {
    // n3 and n4 unknown: the median is of n1 (0) and n2 alone.
    expect(assess({ n2: -50_000 }).hold).toBeNull();
    expect(assess({ n2: -50_000, n3: -50_000 }).hold).not.toBeNull();
  });

  it('a clock known not to be synchronized holds, whatever the offsets; unknown never holds', () => {
    expect(assess({}, false).hold).toMatch(/not synchronized/);
    expect(assess({ n2: 0, n3: 0 }, false).hold).toMatch(/not synchronized/);
    expect(assess({ n2: 0, n3: 0 }, undefined).hold).toBeNull();
    expect(assess({}, undefined).hold).toBeNull();
  });
});

describe('offsetsOf', () => {
  it('keeps fresh offsets of other members, drops self, unknown and stale ones', () => {
    const contact = (id: string) => ({
      n1: { clockOffsetMs: 99, clockSampledAgoMs: 0 },
      n2: { clockOffsetMs: -5, clockSampledAgoMs: 1_000 },
      n3: {},
      n4: { clockOffsetMs: 7, clockSampledAgoMs: 120_000 },
    })[id];
    expect(offsetsOf('n1', ['n1', 'n2', 'n3', 'n4', 'n5'], contact)).toEqual(new Map([['n2', -5]]));
  });
});
