// What Docker itself says happened to a cluster's containers: a live subscription to the daemon's
// event stream (filtered by the cluster's label, from before the first container exists), and the
// checks the system tests make on it. "At no moment more than one container per slot" and "never
// below the replica count" are decided from Docker's own event times (start and die, to the
// nanosecond), not by sampling `docker ps`, so a brief overlap between two polls cannot hide.
//
// The subscription, not a query of the past afterwards: the daemon keeps only its last 256 events
// in memory, and health checks alone (three exec events per check) would push a scenario's starts
// out of that window.

import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { z } from 'zod';
import { labelKeys } from '../../src/executor/labels.ts';

/** One container event as the tests keep it. */
export interface ContainerEvent {
  action: 'create' | 'start' | 'die' | 'destroy';
  containerId: string;
  /** Docker's time of the event, in ns since the epoch. */
  timeNs: bigint;
  service: string;
  /** The slot label as written (JSON: `3`, or `"<node id>"` for a global service). */
  slot: string;
  nodeId: string;
  specVersion: number;
  exitCode: number | null;
}

/** A container's run: from its start to its die (end null: still running when looked at). */
export interface Run {
  containerId: string;
  service: string;
  slot: string;
  nodeId: string;
  specVersion: number;
  startNs: bigint;
  endNs: bigint | null;
}

const actions = ['create', 'start', 'die', 'destroy'] as const;
const eventSchema = z.object({
  Type: z.literal('container'),
  Action: z.enum(actions),
  Actor: z.object({ ID: z.string().min(1), Attributes: z.record(z.string(), z.string()) }),
  timeNano: z.number(),
});

/** Events beyond this many are a runaway scenario, not a record to keep. */
const eventsMax = 100_000;

export class ContainerEventLog {
  readonly events: ContainerEvent[] = [];
  private stream: Readable | undefined;
  private buffered = '';
  private failure: Error | undefined;

  private constructor(private readonly docker: Docker) {}

  /** Subscribes to the container events of cluster `clusterId`; resolves once the stream is open. */
  static async follow(docker: Docker, clusterId: string): Promise<ContainerEventLog> {
    const log = new ContainerEventLog(docker);
    const filters = { type: ['container' as const], event: [...actions], label: [`${labelKeys.cluster}=${clusterId}`] };
    const stream = (await docker.getEvents({ filters })) as Readable;
    log.stream = stream;
    stream.on('data', (chunk: Buffer) => log.take(chunk.toString('utf8')));
    stream.on('error', (err: Error) => { log.failure = err; });
    return log;
  }

  close(): void {
    this.stream?.destroy();
    this.stream = undefined;
  }

  /** Throws if the stream broke: a record with a hole in it proves nothing. */
  assertWhole(): void {
    if (this.failure !== undefined) throw new Error(`the Docker event stream broke: ${this.failure.message}`);
    if (this.events.length >= eventsMax) throw new Error(`more than ${eventsMax} container events: the record was cut`);
  }

  /**
   * Waits until the log has seen the start of every container of the cluster Docker shows as
   * running now, and the die of every one it shows as stopped: the stream is delivered a little
   * after the fact, and a check must not judge a record that is still arriving.
   */
  async catchUp(clusterId: string, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const list = await this.docker.listContainers({ all: true, filters: { label: [`${labelKeys.cluster}=${clusterId}`] } });
      const missing = list.filter((c) => {
        const seen = this.events.filter((e) => e.containerId === c.Id);
        const started = seen.some((e) => e.action === 'start');
        const last = seen.filter((e) => e.action === 'start' || e.action === 'die').at(-1);
        if (c.State === 'running') return !started || last?.action !== 'start';
        return started && last?.action !== 'die';
      });
      if (missing.length === 0) return;
      if (Date.now() > deadline) throw new Error(`the event log lacks the latest start or die of ${missing.map((c) => c.Id.slice(0, 12)).join(', ')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  private take(text: string): void {
    this.buffered += text;
    const lines = this.buffered.split('\n');
    this.buffered = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '' || this.events.length >= eventsMax) continue;
      const parsed = eventSchema.safeParse(JSON.parse(line));
      if (!parsed.success) continue;
      const a = parsed.data.Actor.Attributes;
      const exit = a.exitCode;
      this.events.push({
        action: parsed.data.Action, containerId: parsed.data.Actor.ID, timeNs: BigInt(parsed.data.timeNano),
        service: a[labelKeys.service] ?? '', slot: a[labelKeys.slot] ?? '', nodeId: a[labelKeys.node] ?? '',
        specVersion: Number(a[labelKeys.specVersion] ?? Number.NaN), exitCode: exit === undefined ? null : Number(exit),
      });
    }
  }
}

/** Every run of every container in the events (a container started twice has two runs). */
export function runsOf(events: readonly ContainerEvent[]): Run[] {
  const sorted = [...events].sort((a, b) => (a.timeNs < b.timeNs ? -1 : a.timeNs > b.timeNs ? 1 : 0));
  const open = new Map<string, Run>();
  const runs: Run[] = [];
  for (const e of sorted) {
    if (e.action === 'start') {
      const run: Run = { containerId: e.containerId, service: e.service, slot: e.slot, nodeId: e.nodeId, specVersion: e.specVersion, startNs: e.timeNs, endNs: null };
      open.set(e.containerId, run);
      runs.push(run);
    } else if (e.action === 'die') {
      const run = open.get(e.containerId);
      if (run !== undefined) run.endNs = e.timeNs;
      open.delete(e.containerId);
    }
  }
  return runs;
}

/** Later than any event: the end of a run still going. */
const endOfTime = 2n ** 64n;

/** Pairs of runs of one service's slot that were running at the same moment. */
export function slotOverlaps(runs: readonly Run[], service: string): [Run, Run][] {
  const bySlot = new Map<string, Run[]>();
  for (const r of runs) if (r.service === service) bySlot.set(r.slot, [...(bySlot.get(r.slot) ?? []), r]);
  const out: [Run, Run][] = [];
  for (const slotRuns of bySlot.values()) {
    for (let i = 0; i < slotRuns.length; i++) {
      for (let j = i + 1; j < slotRuns.length; j++) {
        const a = slotRuns[i] as Run;
        const b = slotRuns[j] as Run;
        if (a.startNs < (b.endNs ?? endOfTime) && b.startNs < (a.endNs ?? endOfTime)) out.push([a, b]);
      }
    }
  }
  return out;
}

/**
 * The fewest containers of `service` running at once between `fromNs` and `toNs` (every start
 * and die in between is a moment where the count may change).
 */
export function fewestRunning(runs: readonly Run[], service: string, fromNs: bigint, toNs: bigint): number {
  const mine = runs.filter((r) => r.service === service);
  const at = (t: bigint): number => mine.filter((r) => r.startNs <= t && (r.endNs === null || r.endNs > t)).length;
  const moments = [fromNs, ...mine.flatMap((r) => [r.startNs, ...(r.endNs === null ? [] : [r.endNs])]).filter((t) => t > fromNs && t <= toNs)];
  return Math.min(...moments.map(at));
}

/** A run as a person reads it in a failure message. */
export function describeRun(r: Run): string {
  const end = r.endNs === null ? 'still running' : `died at ${r.endNs}`;
  return `${r.containerId.slice(0, 12)} (${r.service} slot ${r.slot}, v${r.specVersion}, node ${r.nodeId.slice(0, 8)}): started at ${r.startNs}, ${end}`;
}
