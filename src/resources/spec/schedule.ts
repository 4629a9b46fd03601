// A Job's schedule: five-field cron in a time zone, `@every DURATION`, and the `@daily` family.
//
// Pure and exact: instants are Unix ms, wall times are computed with the runtime's time-zone
// database (Intl, full ICU in Node 20), nothing reads the clock. Resolution is the minute for
// cron and the millisecond for @every.
//
// Cron follows Vixie cron: fields minute (0-59), hour (0-23), day of month (1-31), month (1-12
// or jan-dec), day of week (0-7, 0 and 7 are Sunday, or sun-sat); `*`, `a`, `a-b`, `*/s`,
// `a-b/s`, `a/s` and lists of them; when both day fields are restricted a day matches either
// (Vixie's rule). Daylight-saving changes follow the rule Temporal calls "compatible": a wall
// time that does not exist (the clock jumps from 02:00 to 03:00) happens the length of the gap
// later (02:30 runs at 03:30), and a wall time that happens twice (the clock goes back from
// 03:00 to 02:00) runs once, at the first of the two. A schedule that can never fire (Feb 30)
// is refused.
//
// `@every 5m` fires at every multiple of the duration since 1970-01-01T00:00Z (so `@every 1h`
// fires on the hour, UTC), whoever leads: the times are a function of the schedule alone.

import type { Parsed } from './quantity.ts';
import { parseDuration, renderDuration } from './quantity.ts';

export type Schedule =
  | { kind: 'cron'; text: string; timezone: string; fields: CronFields }
  | { kind: 'every'; text: string; everyMs: number };

export interface CronFields {
  minutes: readonly number[];
  hours: readonly number[];
  daysOfMonth: readonly number[];
  months: readonly number[];
  /** 0 (Sunday) to 6. */
  daysOfWeek: readonly number[];
  /** Whether each day field was restricted (not `*`): both restricted means either matches. */
  domRestricted: boolean;
  dowRestricted: boolean;
}

/** The shortest @every (a chore every few ms is a load, not a chore). */
export const everyMsMin = 1_000;
/** The longest @every: a year. */
export const everyMsMax = 366 * 24 * 3_600_000;

const macros: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *', '@monthly': '0 0 1 * *', '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *', '@midnight': '0 0 * * *', '@hourly': '0 * * * *',
};

const monthNames = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const dayNames = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

interface FieldDef {
  name: string;
  min: number;
  max: number;
  names?: readonly string[];
  /** The first name's value (jan = 1, sun = 0). */
  namesFrom?: number;
}

const fieldDefs: readonly FieldDef[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: monthNames, namesFrom: 1 },
  { name: 'day of week', min: 0, max: 7, names: dayNames, namesFrom: 0 },
];

/** Whether the runtime knows the IANA time zone `tz` (`Europe/Paris`, `UTC`). */
export function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** Reads a schedule; `timezone` applies to cron forms (an IANA name, checked by the caller or here). */
export function parseSchedule(text: string, timezone = 'UTC'): Parsed<Schedule> {
  const trimmed = text.trim();
  if (trimmed.startsWith('@every')) return parseEvery(trimmed);
  const expanded = macros[trimmed.toLowerCase()];
  if (trimmed.startsWith('@') && expanded === undefined) {
    return { ok: false, message: `${JSON.stringify(trimmed)} is not a schedule; the @ forms are @every DURATION, ${Object.keys(macros).join(', ')}` };
  }
  if (!isTimeZone(timezone)) return { ok: false, message: `${JSON.stringify(timezone)} is not a time zone this runtime knows (an IANA name such as Europe/Paris or UTC)` };
  const parts = (expanded ?? trimmed).split(/\s+/);
  if (parts.length !== 5) {
    return { ok: false, message: `${JSON.stringify(trimmed)} has ${parts.length} fields; a cron schedule has five (minute hour day-of-month month day-of-week), or write @daily, @every 1h, ...` };
  }
  const values: number[][] = [];
  for (let i = 0; i < 5; i++) {
    const r = parseField(parts[i] ?? '', fieldDefs[i] as FieldDef);
    if (!r.ok) return r;
    values.push(r.value);
  }
  const dow = [...new Set((values[4] ?? []).map((d) => d % 7))].sort((a, b) => a - b);
  const fields: CronFields = {
    minutes: values[0] ?? [], hours: values[1] ?? [], daysOfMonth: values[2] ?? [], months: values[3] ?? [], daysOfWeek: dow,
    domRestricted: !(parts[2] ?? '').startsWith('*'), dowRestricted: !(parts[4] ?? '').startsWith('*'),
  };
  const schedule: Schedule = { kind: 'cron', text: trimmed, timezone, fields };
  // A schedule that cannot fire in 28 years (every weekday/date combination recurs) never will.
  if (nextAfter(schedule, daysFromCivil(2000, 1, 1) * dayMs) === null) {
    return { ok: false, message: `${JSON.stringify(trimmed)} never fires (no month has that day); check the day of month and month fields` };
  }
  return { ok: true, value: schedule };
}

function parseEvery(text: string): Parsed<Schedule> {
  const arg = text.slice('@every'.length).trim();
  if (arg === '') return { ok: false, message: '@every needs a duration: @every 5m, @every 1h30m' };
  const d = parseDuration(arg);
  if (!d.ok) return { ok: false, message: `@every: ${d.message}` };
  if (d.value < everyMsMin) return { ok: false, message: `@every ${arg} is shorter than ${renderDuration(everyMsMin)}, the shortest interval` };
  if (d.value > everyMsMax) return { ok: false, message: `@every ${arg} is longer than a year; use a cron schedule` };
  return { ok: true, value: { kind: 'every', text: `@every ${arg}`, everyMs: d.value } };
}

function parseField(text: string, def: FieldDef): Parsed<number[]> {
  const out = new Set<number>();
  for (const item of text.split(',')) {
    const m = /^(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:\/(\d+))?$/i.exec(item);
    if (m === null) return bad(item, def);
    const step = m[2] === undefined ? 1 : Number(m[2]);
    if (step < 1 || step > def.max) return { ok: false, message: `${def.name}: step /${m[2] ?? ''} must be from 1 to ${def.max}` };
    let lo = def.min;
    let hi = def.max === 7 ? 6 : def.max;
    const range = m[1] ?? '*';
    if (range !== '*') {
      const [a, b] = range.split('-');
      const from = value(a ?? '', def);
      if (from === null) return bad(item, def);
      lo = from;
      if (b !== undefined) {
        const to = value(b, def);
        if (to === null) return bad(item, def);
        hi = to;
      } else {
        // `a/s` runs from a to the end; a bare `a` is one value.
        hi = m[2] === undefined ? from : (def.max === 7 ? 6 : def.max);
      }
      if (hi < lo) return { ok: false, message: `${def.name}: range ${range} goes backwards; write the smaller value first` };
    }
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return { ok: true, value: [...out].sort((a, b) => a - b) };
}

function value(text: string, def: FieldDef): number | null {
  const lower = text.toLowerCase();
  const named = def.names?.indexOf(lower) ?? -1;
  if (named >= 0) return named + (def.namesFrom ?? 0);
  if (!/^\d+$/.test(text)) return null;
  const n = Number(text);
  return n >= def.min && n <= def.max ? n : null;
}

function bad(item: string, def: FieldDef): Parsed<number[]> {
  const names = def.names === undefined ? '' : ` or ${def.names[0] ?? ''}-${def.names[def.names.length - 1] ?? ''}`;
  return { ok: false, message: `${def.name}: ${JSON.stringify(item)} is not a value from ${def.min} to ${def.max}${names}, *, a range a-b, or a step */s` };
}

// ---- time zones ----------------------------------------------------------------------------

const dayMs = 86_400_000;
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
    });
    formatters.set(tz, f);
  }
  return f;
}

// Calendar arithmetic without the Date object (the spec vocabulary touches no clock): days since
// 1970-01-01 from a proleptic Gregorian date and back (Howard Hinnant's civil algorithms).

/** Days since 1970-01-01 of year `y`, month `m` (1-12), day `d`. */
export function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

/** The date of a day since 1970-01-01: year, month (1-12), day (1-31), weekday (0 = Sunday). */
export function civilFromDays(days: number): { y: number; m: number; d: number; weekday: number } {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  return { y: era * 400 + yoe + (m <= 2 ? 1 : 0), m, d, weekday: (((days + 4) % 7) + 7) % 7 };
}

/** The wall time at instant `t` in `tz`, as if it were UTC (ms, to the second). */
function wallOf(tz: string, t: number): number {
  const parts: Record<string, number> = {};
  for (const p of formatter(tz).formatToParts(t)) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  const days = daysFromCivil(parts.year ?? 1970, parts.month ?? 1, parts.day ?? 1);
  return days * dayMs + (parts.hour ?? 0) * 3_600_000 + (parts.minute ?? 0) * 60_000 + (parts.second ?? 0) * 1000;
}

/** Offset of `tz` from UTC at instant `t`, in ms (wall - instant), to the second. */
function offsetAt(tz: string, t: number): number {
  const floored = Math.floor(t / 1000) * 1000;
  return wallOf(tz, floored) - floored;
}

/**
 * The instant a wall time (given as UTC ms) names in `tz`: the earlier one when it happens twice,
 * and the gap's length later when it falls in a gap (Temporal's "compatible" disambiguation).
 */
export function instantOfWall(tz: string, wall: number): number {
  // Offsets in force a little before and after: any transition near this wall time lies between.
  const before = offsetAt(tz, wall - 2 * 86_400_000);
  const after = offsetAt(tz, wall + 2 * 86_400_000);
  const candidates = [...new Set([before, after, offsetAt(tz, wall - before), offsetAt(tz, wall - after)])]
    .map((o) => wall - o).filter((t) => wallOf(tz, t) === wall).sort((a, b) => a - b);
  if (candidates[0] !== undefined) return candidates[0];
  // In a gap: read with the offset before it, which lands the gap's length later.
  return wall - offsetAt(tz, wall - Math.max(before, after) - 3_600_000);
}

// ---- occurrences ---------------------------------------------------------------------------

/** How far next and previous occurrences are searched: 28 years, the calendar's cycle plus leap days. */
const searchDays = 28 * 366;

/** The first scheduled instant strictly after `t`; null if none within 28 years. */
export function nextAfter(s: Schedule, t: number): number | null {
  if (s.kind === 'every') return (Math.floor(t / s.everyMs) + 1) * s.everyMs;
  const startDay = Math.floor(wallOf(s.timezone, t) / dayMs) * dayMs - dayMs;
  for (let i = 0; i < searchDays; i++) {
    const day = startDay + i * dayMs;
    const found = instantsOfDay(s, day).find((x) => x > t);
    if (found !== undefined) return found;
  }
  return null;
}

/** The last scheduled instant at or before `t`; null if none within 28 years. */
export function latestAtOrBefore(s: Schedule, t: number): number | null {
  if (s.kind === 'every') return Math.floor(t / s.everyMs) * s.everyMs;
  const startDay = Math.floor(wallOf(s.timezone, t) / dayMs) * dayMs + dayMs;
  for (let i = 0; i < searchDays; i++) {
    const day = startDay - i * dayMs;
    const found = instantsOfDay(s, day).filter((x) => x <= t).pop();
    if (found !== undefined) return found;
  }
  return null;
}

/** How many scheduled instants lie in (from, to], counting at most `cap`. */
export function countBetween(s: Schedule, from: number, to: number, cap: number): number {
  if (to <= from) return 0;
  if (s.kind === 'every') return Math.min(cap, Math.floor(to / s.everyMs) - Math.floor(from / s.everyMs));
  let n = 0;
  let t: number | null = from;
  while (n < cap) {
    t = nextAfter(s, t);
    if (t === null || t > to) break;
    n++;
  }
  return n;
}

/** The scheduled instants whose wall date is `day` (UTC ms of its midnight, as a wall time), sorted. */
function instantsOfDay(s: Schedule & { kind: 'cron' }, day: number): number[] {
  const d = civilFromDays(Math.floor(day / dayMs));
  const f = s.fields;
  if (!f.months.includes(d.m)) return [];
  const domOk = f.daysOfMonth.includes(d.d);
  const dowOk = f.daysOfWeek.includes(d.weekday);
  const dayOk = f.domRestricted && f.dowRestricted ? domOk || dowOk : domOk && dowOk;
  if (!dayOk) return [];
  const out = new Set<number>();
  for (const h of f.hours) for (const m of f.minutes) out.add(instantOfWall(s.timezone, day + h * 3_600_000 + m * 60_000));
  return [...out].sort((a, b) => a - b);
}

/** For people: the schedule as written, with its zone for cron forms. */
export function describeSchedule(s: Schedule): string {
  return s.kind === 'every' ? s.text : `${s.text} (${s.timezone})`;
}
