// The schedule parser and its occurrences: cron in time zones across daylight-saving changes,
// leap years and month ends, @every, the @daily family, and refusals.

import { describe, expect, it } from 'vitest';
import { countBetween, latestAtOrBefore, nextAfter, parseSchedule, type Schedule } from '../../../src/resources/spec/schedule.ts';

function sched(text: string, tz = 'UTC'): Schedule {
  const r = parseSchedule(text, tz);
  if (!r.ok) throw new Error(r.message);
  return r.value;
}

const iso = (t: number | null): string | null => (t === null ? null : new Date(t).toISOString());
const at = (s: string): number => Date.parse(s);

/** The next n instants after `from`, as ISO strings. */
function nexts(s: Schedule, from: string, n: number): (string | null)[] {
  const out: (string | null)[] = [];
  let t: number | null = at(from);
  for (let i = 0; i < n && t !== null; i++) {
    t = nextAfter(s, t);
    out.push(iso(t));
  }
  return out;
}

describe('cron schedules', () => {
  it('fires at the minute and hour written, in UTC by default', () => {
    expect(nexts(sched('30 2 * * *'), '2026-03-01T00:00:00Z', 2)).toEqual(['2026-03-01T02:30:00.000Z', '2026-03-02T02:30:00.000Z']);
    expect(nexts(sched('*/15 * * * *'), '2026-03-01T00:07:00Z', 3)).toEqual(['2026-03-01T00:15:00.000Z', '2026-03-01T00:30:00.000Z', '2026-03-01T00:45:00.000Z']);
  });

  it('is strictly after: an instant on the schedule is not its own next', () => {
    expect(iso(nextAfter(sched('0 * * * *'), at('2026-03-01T05:00:00Z')))).toBe('2026-03-01T06:00:00.000Z');
    expect(iso(latestAtOrBefore(sched('0 * * * *'), at('2026-03-01T05:00:00Z')))).toBe('2026-03-01T05:00:00.000Z');
  });

  it('reads names, ranges, steps and lists', () => {
    expect(nexts(sched('0 9 * * mon-fri'), '2026-12-04T10:00:00Z', 2)).toEqual(['2026-12-07T09:00:00.000Z', '2026-12-08T09:00:00.000Z']);
    expect(nexts(sched('0 0 1 jan,jul *'), '2026-02-01T00:00:00Z', 2)).toEqual(['2026-07-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z']);
    expect(nexts(sched('5/20 * * * *'), '2026-01-01T00:00:00Z', 3)).toEqual(['2026-01-01T00:05:00.000Z', '2026-01-01T00:25:00.000Z', '2026-01-01T00:45:00.000Z']);
    // 7 is Sunday too.
    expect(nexts(sched('0 0 * * 7'), '2026-12-01T00:00:00Z', 1)).toEqual(['2026-12-06T00:00:00.000Z']);
  });

  it('matches either day field when both are restricted (Vixie cron)', () => {
    // The 13th, or any Friday.
    expect(nexts(sched('0 0 13 * fri'), '2026-03-01T00:00:00Z', 3)).toEqual(['2026-03-06T00:00:00.000Z', '2026-03-13T00:00:00.000Z', '2026-03-20T00:00:00.000Z']);
  });

  it('end of month: the 31st skips the months without one', () => {
    expect(nexts(sched('0 12 31 * *'), '2026-01-31T13:00:00Z', 3)).toEqual(['2026-03-31T12:00:00.000Z', '2026-05-31T12:00:00.000Z', '2026-07-31T12:00:00.000Z']);
  });

  it('leap years: Feb 29 fires only in leap years', () => {
    expect(nexts(sched('0 0 29 2 *'), '2026-01-01T00:00:00Z', 2)).toEqual(['2028-02-29T00:00:00.000Z', '2032-02-29T00:00:00.000Z']);
    expect(iso(latestAtOrBefore(sched('0 0 29 2 *'), at('2027-06-01T00:00:00Z')))).toBe('2024-02-29T00:00:00.000Z');
  });

  it('refuses a schedule that never fires, and says so', () => {
    const r = parseSchedule('0 0 30 2 *');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toMatch(/never fires/);
  });

  it('refuses bad fields with the field named', () => {
    const cases: [string, RegExp][] = [
      ['60 * * * *', /minute: "60"/], ['* 24 * * *', /hour/], ['* * 0 * *', /day of month/], ['* * * 13 *', /month/],
      ['* * * * 8', /day of week/], ['* * *', /has 3 fields/], ['5-1 * * * *', /goes backwards/], ['*/0 * * * *', /step/],
      ['@fortnightly', /not a schedule/], ['@every', /needs a duration/], ['@every 10', /no unit/], ['@every 500ms', /shortest/],
    ];
    for (const [text, message] of cases) {
      const r = parseSchedule(text);
      expect(r.ok, text).toBe(false);
      if (!r.ok) expect(r.message, text).toMatch(message);
    }
    const tz = parseSchedule('0 0 * * *', 'Mars/Olympus');
    expect(tz.ok).toBe(false);
    if (!tz.ok) expect(tz.message).toMatch(/not a time zone/);
  });
});

describe('time zones and daylight saving', () => {
  it('fires at the wall time of the zone', () => {
    // 02:30 in Paris is 01:30Z in winter (CET) and 00:30Z in summer (CEST).
    expect(nexts(sched('30 2 * * *', 'Europe/Paris'), '2026-01-10T00:00:00Z', 1)).toEqual(['2026-01-10T01:30:00.000Z']);
    expect(nexts(sched('30 2 * * *', 'Europe/Paris'), '2026-07-10T00:00:00Z', 1)).toEqual(['2026-07-10T00:30:00.000Z']);
  });

  it('spring forward: a wall time in the gap runs the gap length later, once', () => {
    // 2026-03-29 in Paris: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist and runs at 03:30 CEST (01:30Z).
    expect(nexts(sched('30 2 * * *', 'Europe/Paris'), '2026-03-28T12:00:00Z', 2)).toEqual(['2026-03-29T01:30:00.000Z', '2026-03-30T00:30:00.000Z']);
    // An hourly schedule has one run fewer that day (23 hours), none twice.
    const hourly = sched('0 * * * *', 'Europe/Paris');
    expect(countBetween(hourly, at('2026-03-28T23:00:00Z'), at('2026-03-29T22:00:00Z'), 100)).toBe(23);
  });

  it('fall back: a wall time that happens twice runs once, at the first', () => {
    // 2026-10-25 in Paris: 03:00 CEST goes back to 02:00 CET; 02:30 happens at 00:30Z and 01:30Z.
    expect(nexts(sched('30 2 * * *', 'Europe/Paris'), '2026-10-24T12:00:00Z', 2)).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);
    const hourly = sched('0 * * * *', 'Europe/Paris');
    // The day has 25 hours and 24 wall-clock hours: the repeated 02:00 runs once.
    expect(countBetween(hourly, at('2026-10-24T22:00:00Z'), at('2026-10-25T23:00:00Z'), 100)).toBe(24);
  });

  it('America/New_York changes at 02:00 local too, on its own dates', () => {
    expect(nexts(sched('30 2 * * *', 'America/New_York'), '2026-03-07T12:00:00Z', 2)).toEqual(['2026-03-08T07:30:00.000Z', '2026-03-09T06:30:00.000Z']);
  });

  it('latestAtOrBefore and nextAfter agree across a change', () => {
    const s = sched('*/20 1-3 * * *', 'Europe/Paris');
    let t = at('2026-10-24T20:00:00Z');
    for (let i = 0; i < 30; i++) {
      const n = nextAfter(s, t);
      expect(n).not.toBeNull();
      expect(latestAtOrBefore(s, n as number)).toBe(n);
      expect(latestAtOrBefore(s, (n as number) - 1)).toBe(i === 0 ? latestAtOrBefore(s, t) : t);
      t = n as number;
    }
  });
});

describe('@every and the @ names', () => {
  it('@every fires at multiples of the duration since the epoch', () => {
    expect(nexts(sched('@every 5s'), '2026-03-01T00:00:03Z', 3)).toEqual(['2026-03-01T00:00:05.000Z', '2026-03-01T00:00:10.000Z', '2026-03-01T00:00:15.000Z']);
    expect(iso(latestAtOrBefore(sched('@every 1h'), at('2026-03-01T05:59:59Z')))).toBe('2026-03-01T05:00:00.000Z');
    expect(countBetween(sched('@every 5s'), at('2026-03-01T00:00:00Z'), at('2026-03-01T00:01:00Z'), 1000)).toBe(12);
    expect(countBetween(sched('@every 1s'), 0, 1e9, 1000)).toBe(1000);
  });

  it('@daily, @hourly, @weekly, @monthly, @yearly', () => {
    expect(nexts(sched('@daily', 'Europe/Paris'), '2026-03-01T00:00:00Z', 1)).toEqual(['2026-03-01T23:00:00.000Z']);
    expect(nexts(sched('@hourly'), '2026-03-01T00:10:00Z', 1)).toEqual(['2026-03-01T01:00:00.000Z']);
    expect(nexts(sched('@weekly'), '2026-12-01T00:00:00Z', 1)).toEqual(['2026-12-06T00:00:00.000Z']);
    expect(nexts(sched('@monthly'), '2026-12-15T00:00:00Z', 1)).toEqual(['2027-01-01T00:00:00.000Z']);
    expect(nexts(sched('@yearly'), '2026-12-15T00:00:00Z', 1)).toEqual(['2027-01-01T00:00:00.000Z']);
  });
});

describe('calendar arithmetic', () => {
  it('agrees with the runtime calendar from 1900 to 2200', async () => {
    const { civilFromDays, daysFromCivil } = await import('../../../src/resources/spec/schedule.ts');
    for (let days = -25_567; days < 84_000; days += 13) {
      const d = new Date(days * 86_400_000);
      expect(civilFromDays(days)).toEqual({ y: d.getUTCFullYear(), m: d.getUTCMonth() + 1, d: d.getUTCDate(), weekday: d.getUTCDay() });
      expect(daysFromCivil(d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate())).toBe(days);
    }
  });
});
