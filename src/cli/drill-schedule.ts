// shoal drill schedule: one drill on a schedule (game days), run by a long-lived CLI process the
// operator keeps under a service manager (docs/operations.md, "Drills on a schedule", says why
// it is not a timer unit nor a loop inside the cluster). At each tick it looks at the cluster,
// skips the tick when the cluster is not healthy (a drill then proves nothing and may cost the
// quorum), else runs the drill as `shoal drill KIND` does and keeps its report in the store.
// Ticks never overlap (the next one is computed after a drill ends) and are never caught up.
// The schedule's arithmetic and its loop take their clock and their cluster as ports, so the
// tests drive them without timers.

import type { DrillReport } from '../node/drill/drill-report.ts';
import { UsageError } from './args.ts';
import { label, type View } from './cluster-view.ts';
import { checkTolerance } from './drill-cluster.ts';

/** The shortest period: a drill with its recovery takes up to a minute or two. */
export const everyMsMin = 60_000;
/** The longest period: a year. */
export const everyMsMax = 366 * 24 * 3_600_000;
/** Drills in one schedule at most (--count). */
export const countMax = 1_000_000;
const dayMs = 24 * 3_600_000;

export interface Schedule {
  everyMs: number;
  /** Local wall-clock time the ticks line up with (--at HH:MM); absent: they line up with the start. */
  at?: { hour: number; minute: number };
}

/** `HH:MM`, 24-hour, local time. */
export function parseAt(text: string): { hour: number; minute: number } {
  const m = /^([01]?\d|2[0-3]):([0-5]\d)$/.exec(text);
  if (m === null) throw new UsageError(`--at takes a local time as HH:MM (00:00 to 23:59), got '${text}'`);
  return { hour: Number(m[1]), minute: Number(m[2]) };
}

/**
 * The first tick strictly after `nowMs`. Without `at` the ticks are startMs + k·every (k ≥ 1),
 * so a restarted scheduler does not run a drill at once. With `at` they are today's HH:MM plus
 * or minus whole periods; a period of whole days steps by calendar days, so a daily drill at
 * 03:00 stays at 03:00 across a daylight-saving change.
 */
export function nextTick(s: Schedule, startMs: number, nowMs: number): number {
  if (s.at === undefined) return startMs + (Math.floor(Math.max(0, nowMs - startMs) / s.everyMs) + 1) * s.everyMs;
  const anchor = new Date(nowMs);
  anchor.setHours(s.at.hour, s.at.minute, 0, 0);
  if (s.everyMs % dayMs === 0) {
    const days = s.everyMs / dayMs;
    // Today's HH:MM if it is still ahead, else the day `days` on (a grid through today).
    if (anchor.getTime() <= nowMs) anchor.setDate(anchor.getDate() + days);
    return anchor.getTime();
  }
  const k = Math.floor((nowMs - anchor.getTime()) / s.everyMs) + 1;
  return anchor.getTime() + k * s.everyMs;
}

/** Why a tick is skipped: the cluster has no leader, a member is not healthy, or the drill would cost the quorum. */
export function skipReason(view: View, allowOutage: boolean): string | undefined {
  if (view.leader === null) return 'the cluster has no leader';
  const sick = view.members.filter((m) => m.health !== 'healthy');
  if (sick.length > 0) return sick.map((m) => `${label(m)} is ${m.health}`).join(', ');
  try {
    checkTolerance(view, allowOutage);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

export type ScheduleEvent =
  | { event: 'next'; at: string }
  | { event: 'skipped'; at: string; reason: string }
  | { event: 'ran'; at: string; report: DrillReport; kept: boolean; notKept?: string }
  | { event: 'failed'; at: string; error: string };

export interface SchedulePorts {
  /** Wall-clock ms (Date.now). */
  now(): number;
  /** Resolves after `ms`, or early once `signal` aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  view(): Promise<View>;
  /** Runs one drill (runDrill); throws when it could not be carried out. */
  run(): Promise<DrillReport>;
  /** Keeps a report in the store; why not, or undefined when kept. */
  keep(report: DrillReport): Promise<string | undefined>;
  emit(ev: ScheduleEvent): void;
}

export interface ScheduleResult {
  ran: number;
  failed: number;
  skipped: number;
}

/** Runs the schedule until `count` drills have run (skipped ticks do not count) or `stop` aborts. */
export async function runSchedule(s: Schedule, o: { count?: number; allowOutage: boolean }, ports: SchedulePorts, stop: AbortSignal): Promise<ScheduleResult> {
  const result: ScheduleResult = { ran: 0, failed: 0, skipped: 0 };
  const startMs = ports.now();
  while (!stop.aborted && (o.count === undefined || result.ran < o.count)) {
    const tick = nextTick(s, startMs, ports.now());
    const at = new Date(tick).toISOString();
    ports.emit({ event: 'next', at });
    while (!stop.aborted && ports.now() < tick) await ports.sleep(tick - ports.now(), stop);
    if (stop.aborted) break;
    await runTick(at, o.allowOutage, ports, result);
  }
  return result;
}

async function runTick(at: string, allowOutage: boolean, ports: SchedulePorts, result: ScheduleResult): Promise<void> {
  let reason: string | undefined;
  try {
    reason = skipReason(await ports.view(), allowOutage);
  } catch (err) {
    reason = `no member answered (${(err as Error).message})`;
  }
  if (reason !== undefined) {
    result.skipped++;
    ports.emit({ event: 'skipped', at, reason });
    return;
  }
  result.ran++;
  let report: DrillReport;
  try {
    report = await ports.run();
  } catch (err) {
    // A service's disruption budget said no (a node down, an update under way): the drill did
    // nothing, and the tick is skipped as one the cluster was not fit for.
    if ((err as { code?: unknown }).code === 'disruption_budget_exceeded') {
      result.ran--;
      result.skipped++;
      ports.emit({ event: 'skipped', at, reason: (err as Error).message });
      return;
    }
    result.failed++;
    ports.emit({ event: 'failed', at, error: (err as Error).message });
    return;
  }
  if (!report.ok) result.failed++;
  const notKept = await ports.keep(report);
  ports.emit({ event: 'ran', at, report, kept: notKept === undefined, ...(notKept !== undefined ? { notKept } : {}) });
}
