// shoal drill schedule (src/cli/drill-schedule.ts): when the ticks fall, when a tick is skipped,
// and the loop driven by a fake clock and a fake cluster (no timers, nothing timed).

import { describe, expect, it } from 'vitest';
import type { View } from '../../src/cli/cluster-view.ts';
import { UsageError } from '../../src/cli/args.ts';
import { CliFailure } from '../../src/cli/client-errors.ts';
import { nextTick, parseAt, runSchedule, skipReason, type ScheduleEvent, type SchedulePorts } from '../../src/cli/drill-schedule.ts';
import type { DrillReport } from '../../src/node/drill/drill-report.ts';

const minute = 60_000;
const hour = 60 * minute;
const local = (y: number, mo: number, d: number, h: number, mi = 0): number => new Date(y, mo - 1, d, h, mi).getTime();

describe('parseAt', () => {
  it('takes HH:MM in 24-hour time and refuses anything else', () => {
    expect(parseAt('03:00')).toEqual({ hour: 3, minute: 0 });
    expect(parseAt('3:05')).toEqual({ hour: 3, minute: 5 });
    expect(parseAt('23:59')).toEqual({ hour: 23, minute: 59 });
    for (const bad of ['24:00', '12:60', '3', '03:00:00', 'noon', '']) expect(() => parseAt(bad), bad).toThrow(UsageError);
  });
});

describe('nextTick', () => {
  it('without --at: one period after the start, then every period, never at once', () => {
    const start = 1_000_000;
    expect(nextTick({ everyMs: hour }, start, start)).toBe(start + hour);
    expect(nextTick({ everyMs: hour }, start, start + hour - 1)).toBe(start + hour);
    expect(nextTick({ everyMs: hour }, start, start + hour)).toBe(start + 2 * hour);
    // A drill that ran past several ticks: the next one ahead, none caught up.
    expect(nextTick({ everyMs: hour }, start, start + 3.5 * hour)).toBe(start + 4 * hour);
  });

  it('with --at and whole days: today at HH:MM if still ahead, else the day after', () => {
    const daily = { everyMs: 24 * hour, at: { hour: 3, minute: 0 } };
    expect(nextTick(daily, 0, local(2026, 12, 2, 1, 30))).toBe(local(2026, 12, 2, 3));
    expect(nextTick(daily, 0, local(2026, 12, 2, 3))).toBe(local(2026, 12, 3, 3));
    expect(nextTick(daily, 0, local(2026, 12, 31, 23, 59))).toBe(local(2027, 1, 1, 3));
    expect(nextTick({ ...daily, everyMs: 7 * 24 * hour }, 0, local(2026, 12, 2, 4))).toBe(local(2026, 12, 9, 3));
  });

  it('with --at and hours: the grid through today at HH:MM', () => {
    const sixHourly = { everyMs: 6 * hour, at: { hour: 3, minute: 0 } };
    expect(nextTick(sixHourly, 0, local(2026, 12, 2, 1))).toBe(local(2026, 12, 2, 3));
    expect(nextTick(sixHourly, 0, local(2026, 12, 2, 3))).toBe(local(2026, 12, 2, 9));
    expect(nextTick(sixHourly, 0, local(2026, 12, 2, 22))).toBe(local(2026, 12, 3, 3));
    expect(nextTick({ everyMs: 30 * minute, at: { hour: 0, minute: 10 } }, 0, local(2026, 12, 2, 14, 25))).toBe(local(2026, 12, 2, 14, 40));
  });
});

const member = (id: string, health: View['members'][number]['health'] = 'healthy'): View['members'][number] => ({
  id, name: `n-${id}`, peerAddress: `${id}:7200`, apiAddress: `${id}:7100`, role: 'voter', matchIndex: 1, lag: 0, rttMs: 1, softwareVersion: '1', health,
});
const view = (members: View['members'], leader: string | null = 'a'): View => ({
  clusterId: 'c', view: 'leader', node: 'a', leader, term: 2, commitIndex: 1, appliedIndex: 1, lastIndex: 1, members,
});

describe('skipReason', () => {
  it('runs on a healthy cluster that can lose a voter', () => {
    expect(skipReason(view([member('a'), member('b'), member('c')]), false)).toBeUndefined();
  });
  it('skips without a leader, with a member not healthy, or when the drill would cost the quorum', () => {
    expect(skipReason(view([member('a'), member('b'), member('c')], null), false)).toBe('the cluster has no leader');
    expect(skipReason(view([member('a'), member('b', 'unreachable'), member('c', 'lagging')]), false)).toBe('n-b (b) is unreachable, n-c (c) is lagging');
    expect(skipReason(view([member('a')]), false)).toContain('would stop the cluster');
    expect(skipReason(view([member('a')]), true)).toBeUndefined();
  });
});

const report = (ok: boolean): DrillReport => ({
  id: 'drill-x', drill: 'leader-kill', startedAt: '2026-12-02T03:00:00.000Z', target: { id: 'a', name: 'n-a' }, faultSeconds: null,
  leaderBefore: 'a', leaderAfter: 'b', newLeaderMs: 300, longestWriteGapMs: 300,
  writes: { attempted: 1, acknowledged: 1, failed: 0, lost: ok ? 0 : 1 }, reads: { done: 1, failed: 0, backwards: 0 },
  workloads: { runningBefore: 0, runningAfter: 0, restarted: 0, duplicated: 0 }, servicesBackMs: 0, recovered: true, recoveryMs: 1000, problems: [], ok,
});

/** A cluster whose health per tick the test lists; each drill takes two minutes of the fake clock. */
function fakePorts(healthy: boolean[], outcomes: Array<boolean | 'throws' | 'budget'>): { ports: SchedulePorts; events: ScheduleEvent[]; kept: DrillReport[] } {
  let now = 0;
  let tick = 0;
  let drill = 0;
  const events: ScheduleEvent[] = [];
  const kept: DrillReport[] = [];
  const ports: SchedulePorts = {
    now: () => now,
    sleep: (ms) => { now += ms; return Promise.resolve(); },
    view: () => Promise.resolve(view([member('a'), member('b'), member('c', healthy[tick++] === false ? 'unreachable' : 'healthy')])),
    run: () => {
      now += 2 * minute;
      const o = outcomes[drill++] ?? true;
      if (o === 'budget') return Promise.reject(new CliFailure('waiting for the disruption budget of web (maxUnavailable 1): 1 slot unavailable (slot 2: node n2 down)', 1, 'disruption_budget_exceeded'));
      return o === 'throws' ? Promise.reject(new Error('the target could not isolate itself')) : Promise.resolve(report(o));
    },
    keep: (r) => { kept.push(r); return Promise.resolve(undefined); },
    emit: (ev) => events.push(ev),
  };
  return { ports, events, kept };
}

describe('runSchedule', () => {
  it('runs --count drills, skipping unhealthy ticks (not counted), and keeps every report', async () => {
    const f = fakePorts([true, false, true, true], [true, true, true]);
    const r = await runSchedule({ everyMs: hour }, { count: 3, allowOutage: false }, f.ports, new AbortController().signal);
    expect(r).toEqual({ ran: 3, failed: 0, skipped: 1 });
    expect(f.kept).toHaveLength(3);
    expect(f.events.map((e) => e.event)).toEqual(['next', 'ran', 'next', 'skipped', 'next', 'ran', 'next', 'ran']);
    // One tick an hour from the start, whatever the drills took.
    expect(f.events.filter((e) => e.event === 'next').map((e) => e.at)).toEqual([1, 2, 3, 4].map((h) => new Date(h * hour).toISOString()));
    expect(f.events[3]).toMatchObject({ event: 'skipped', reason: 'n-c (c) is unreachable' });
  });

  it('counts a failed drill and one that could not be carried out, and goes on', async () => {
    const f = fakePorts([], [false, 'throws', true]);
    const r = await runSchedule({ everyMs: hour }, { count: 3, allowOutage: false }, f.ports, new AbortController().signal);
    expect(r).toEqual({ ran: 3, failed: 2, skipped: 0 });
    expect(f.kept.map((k) => k.ok)).toEqual([false, true]);
    expect(f.events.find((e) => e.event === 'failed')).toMatchObject({ error: 'the target could not isolate itself' });
  });

  it('skips a tick whose drill a disruption budget refused (nothing was done), not counting it', async () => {
    const f = fakePorts([], ['budget', true]);
    const r = await runSchedule({ everyMs: hour }, { count: 1, allowOutage: false }, f.ports, new AbortController().signal);
    expect(r).toEqual({ ran: 1, failed: 0, skipped: 1 });
    expect(f.events.find((e) => e.event === 'skipped')).toMatchObject({ reason: expect.stringMatching(/^waiting for the disruption budget of web/) });
  });

  it('stops when told to, running nothing more', async () => {
    const f = fakePorts([], []);
    const stop = new AbortController();
    const emit = f.ports.emit;
    f.ports.emit = (ev) => { emit(ev); if (ev.event === 'ran') stop.abort(); };
    const r = await runSchedule({ everyMs: hour }, { allowOutage: false }, f.ports, stop.signal);
    expect(r).toEqual({ ran: 1, failed: 0, skipped: 0 });
  });
});
