// The pure half of the Swarm comparison (bench/swarm.ts): what a Docker daemon's event stream says
// about the containers of either system, a timeline of which container of which service and
// slot ran on which daemon when, and the figures read from it (running counts, duplicate slots,
// time below the wanted count), plus the median-and-range cells of the table. No I/O, no clock:
// test/bench/swarm-parse.test.ts checks it.

/** One container event, as `GET /events` (`docker events --format '{{json .}}'`) writes it. */
export interface ContainerEvent {
  /** ms since the epoch (from timeNano). */
  at: number;
  action: 'start' | 'die' | 'destroy';
  id: string;
  service: string;
  /** The task's slot (a replicated service's number), or the task id when none is known. */
  slot: string;
}

/** Swarm's task container name: `<service>.<slot>.<task id>` (a global service's: `<service>.<node id>.<task id>`). */
const swarmName = /^(.+)\.([0-9a-z]+)\.([0-9a-z]{25})$/;

/**
 * A line of the event stream: a container event of a swarm task (labels com.docker.swarm.*) or of
 * a shoal task (labels io.shoal.*), or undefined for anything else (other types, other actions,
 * other containers, a line that is not JSON).
 */
export function parseEvent(line: string): ContainerEvent | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null) return undefined;
  const e = raw as { Type?: unknown; Action?: unknown; status?: unknown; id?: unknown; timeNano?: unknown; time?: unknown; Actor?: { ID?: unknown; Attributes?: Record<string, unknown> } };
  if (e.Type !== undefined && e.Type !== 'container') return undefined;
  const action = typeof e.Action === 'string' ? e.Action : typeof e.status === 'string' ? e.status : '';
  if (action !== 'start' && action !== 'die' && action !== 'destroy') return undefined;
  const id = typeof e.Actor?.ID === 'string' ? e.Actor.ID : typeof e.id === 'string' ? e.id : '';
  if (id === '') return undefined;
  const attrs = e.Actor?.Attributes ?? {};
  const str = (k: string): string | undefined => (typeof attrs[k] === 'string' ? (attrs[k] as string) : undefined);
  const at = typeof e.timeNano === 'number' ? e.timeNano / 1e6 : typeof e.time === 'number' ? e.time * 1000 : Number.NaN;
  if (!Number.isFinite(at)) return undefined;
  const shoalService = str('io.shoal.service');
  if (shoalService !== undefined) return { at, action, id, service: shoalService, slot: str('io.shoal.slot') ?? str('io.shoal.task') ?? id };
  const swarmService = str('com.docker.swarm.service.name');
  if (swarmService !== undefined) {
    const m = swarmName.exec(str('name') ?? '');
    return { at, action, id, service: swarmService, slot: m?.[1] === swarmService && m[2] !== undefined ? m[2] : (str('com.docker.swarm.task.id') ?? id) };
  }
  return undefined;
}

/** A container's run: from its start to its end (undefined while it runs). */
export interface Run {
  daemon: string;
  id: string;
  service: string;
  slot: string;
  start: number;
  end: number | undefined;
}

/**
 * Which containers ran where and when, from the events of every daemon. A daemon that dies takes
 * its stream with it: `daemonLost` ends its runs at that moment, `resync` reconciles them with a
 * listing once the daemon is back.
 */
export class Timeline {
  readonly runs: Run[] = [];
  private readonly open = new Map<string, Run>();

  private key(daemon: string, id: string): string {
    return `${daemon}/${id}`;
  }

  add(daemon: string, e: ContainerEvent): void {
    const k = this.key(daemon, e.id);
    const cur = this.open.get(k);
    if (e.action === 'start') {
      if (cur !== undefined) return;
      const run: Run = { daemon, id: e.id, service: e.service, slot: e.slot, start: e.at, end: undefined };
      this.runs.push(run);
      this.open.set(k, run);
      return;
    }
    if (cur !== undefined) {
      cur.end = e.at;
      this.open.delete(k);
    }
  }

  /** Every run still open on `daemon` ends at `at` (its daemon and its containers were killed). */
  daemonLost(daemon: string, at: number): void {
    for (const [k, run] of this.open) {
      if (run.daemon !== daemon) continue;
      run.end = at;
      this.open.delete(k);
    }
  }

  /** Reconciles `daemon` with a listing of its running containers at `at`: what is not listed has ended, what is listed runs. */
  resync(daemon: string, at: number, running: ReadonlyArray<{ id: string; service: string; slot: string; startedAt: number }>): void {
    const ids = new Set(running.map((r) => r.id));
    for (const [k, run] of this.open) {
      if (run.daemon === daemon && !ids.has(run.id)) {
        run.end = at;
        this.open.delete(k);
      }
    }
    for (const r of running) this.add(daemon, { at: r.startedAt, action: 'start', id: r.id, service: r.service, slot: r.slot });
  }

  /** The runs open now, optionally of one service. */
  running(service?: string): Run[] {
    return [...this.open.values()].filter((r) => service === undefined || r.service === service);
  }

  /** Runs of a service started at or after `since`. */
  startedSince(service: string, since: number): Run[] {
    return this.runs.filter((r) => r.service === service && r.start >= since);
  }

  /** Runs (any service, any daemon) that ended within [from, to). */
  endedWithin(from: number, to: number): Run[] {
    return this.runs.filter((r) => r.end !== undefined && r.end >= from && r.end < to);
  }
}

/** Whether every service runs exactly its wanted count and no slot twice. */
export function convergedNow(tl: Timeline, wanted: Readonly<Record<string, number>>): boolean {
  for (const [service, n] of Object.entries(wanted)) {
    const runs = tl.running(service);
    if (runs.length !== n) return false;
    if (new Set(runs.map((r) => r.slot)).size !== runs.length) return false;
  }
  return true;
}

/** The runs of `service` overlapping [from, to), clipped to it. */
function clipped(runs: readonly Run[], service: string | undefined, from: number, to: number): Array<{ run: Run; start: number; end: number }> {
  return runs
    .filter((r) => (service === undefined || r.service === service) && r.start < to && (r.end ?? Number.POSITIVE_INFINITY) > from)
    .map((run) => ({ run, start: Math.max(run.start, from), end: Math.min(run.end ?? to, to) }));
}

/** ms within [from, to) during which fewer than `wanted` containers of `service` ran. */
export function msBelow(runs: readonly Run[], service: string, wanted: number, from: number, to: number): number {
  const edges: Array<[number, number]> = [];
  for (const c of clipped(runs, service, from, to)) edges.push([c.start, 1], [c.end, -1]);
  // Ends before starts at the same instant: a replacement that starts as the old one ends is a gap of 0.
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let count = 0;
  let below = 0;
  let t = from;
  for (const [at, d] of edges) {
    if (count < wanted) below += at - t;
    count += d;
    t = at;
  }
  if (count < wanted) below += to - t;
  return below;
}

/**
 * Slots that ran twice at once within [from, to): for each (service, slot), the most containers
 * running together beyond one, summed: 1 for a slot that ran on two daemons at once, 0 when none did.
 */
export function duplicates(runs: readonly Run[], from: number, to: number): { count: number; slots: string[] } {
  const bySlot = new Map<string, Array<[number, number]>>();
  for (const c of clipped(runs, undefined, from, to)) {
    if (c.end <= c.start) continue;
    const k = `${c.run.service}#${c.run.slot}`;
    bySlot.set(k, [...(bySlot.get(k) ?? []), [c.start, 1], [c.end, -1]]);
  }
  let count = 0;
  const slots: string[] = [];
  for (const [k, edges] of bySlot) {
    // Ends before starts at the same instant: a replacement started as the old one ended is no duplicate.
    edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let cur = 0;
    let most = 0;
    for (const [, d] of edges) {
      cur += d;
      most = Math.max(most, cur);
    }
    if (most > 1) {
      count += most - 1;
      slots.push(k);
    }
  }
  return { count, slots: slots.sort() };
}

/** Swarm's manager status of one node, from `GET /nodes`. */
export interface SwarmNodeView {
  id: string;
  state: string;
  availability: string;
  leader: boolean;
  reachability: string | undefined;
}

export function parseSwarmNodes(body: unknown): SwarmNodeView[] {
  if (!Array.isArray(body)) throw new Error('GET /nodes: not a list');
  return body.map((n: { ID?: unknown; Status?: { State?: unknown }; Spec?: { Availability?: unknown }; ManagerStatus?: { Leader?: unknown; Reachability?: unknown } }) => ({
    id: String(n.ID),
    state: String(n.Status?.State ?? 'unknown'),
    availability: String(n.Spec?.Availability ?? 'unknown'),
    leader: n.ManagerStatus?.Leader === true,
    reachability: typeof n.ManagerStatus?.Reachability === 'string' ? n.ManagerStatus.Reachability : undefined,
  }));
}

export function median(xs: readonly number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s.length % 2 === 1 ? (s[(s.length - 1) / 2] as number) : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
}

export function fmtNum(n: number, digits = 0): string {
  if (!Number.isFinite(n)) return '–';
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** `median (min–max)` over the rounds, `–` with none; one round: the value alone. */
export function cell(xs: readonly number[], digits = 0): string {
  const f = xs.filter((x) => Number.isFinite(x));
  if (f.length === 0) return '–';
  if (f.length === 1) return fmtNum(f[0] as number, digits);
  return `${fmtNum(median(f), digits)} (${fmtNum(Math.min(...f), digits)}–${fmtNum(Math.max(...f), digits)})`;
}

/** shoal / Swarm of the medians, `–` when either is missing or Swarm's is 0 (then shoal's 0 reads `=`). */
export function ratioCell(shoal: readonly number[], swarm: readonly number[]): string {
  const a = median(shoal);
  const b = median(swarm);
  if (!Number.isFinite(a) || !Number.isFinite(b)) return '–';
  if (b === 0) return a === 0 ? '=' : '∞';
  return (a / b).toFixed(2);
}

/** Docker's `DockerRootDir`-style size of a directory tree in bytes, from `du -sb` output. */
export function parseDuBytes(out: string): number {
  const n = Number(out.trim().split(/\s+/)[0]);
  if (!Number.isFinite(n)) throw new Error(`du: cannot read ${JSON.stringify(out)}`);
  return n;
}
