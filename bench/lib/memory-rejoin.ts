// Resident memory of each node idle after start and after N documents, then the time for a
// wiped follower to come back and catch up with those N documents. Runs on a fresh cluster
// that nothing else has written to.

import { cpuMs, rssMiB, sleep } from './proc.ts';
import type { RejoinReport, System } from './system.ts';
import { fill } from './throughput.ts';

export interface MemoryRejoinOptions {
  docs: number;
  /** Quiet time before each memory reading (lets start-up, snapshots and GC settle). */
  settleMs: number;
  /** Window over which the idle cluster's CPU use is measured. */
  idleWindowMs: number;
  rejoin: boolean;
  rejoinTimeoutMs: number;
}

export interface MemoryRejoinResult {
  system: string;
  idleMiB: number[];
  /** CPU of each idle node, in % of one core. */
  idleCpuPercent: number[];
  loadedMiB: number[];
  docs: number;
  loadSeconds: number;
  rejoin: (RejoinReport & { node: string }) | undefined;
}

export const docsCollection = 'docs';

export async function runMemoryRejoin(sys: System, opts: MemoryRejoinOptions): Promise<MemoryRejoinResult> {
  await sleep(opts.settleMs);
  const pids = sys.nodes.map((n) => n.pid ?? 0);
  const cpu0 = pids.map(cpuMs);
  await sleep(opts.idleWindowMs);
  const idleCpuPercent = pids.map((p, i) => ((cpuMs(p) - (cpu0[i] ?? 0)) / opts.idleWindowMs) * 100);
  const idleMiB = rssAll(sys);
  const leader = await sys.leader();
  if (leader === undefined) throw new Error(`${sys.kind}: no leader`);
  const { seconds } = await fill(sys, leader, docsCollection, opts.docs, 64);
  await sleep(opts.settleMs);
  const loadedMiB = rssAll(sys);
  let rejoin: MemoryRejoinResult['rejoin'];
  if (opts.rejoin) {
    const l = await sys.leader();
    const follower = sys.nodes.findIndex((_, i) => i !== l);
    const report = await sys.wipeAndRejoin(follower, opts.rejoinTimeoutMs);
    rejoin = { ...report, node: sys.nodes[follower]?.name ?? '?' };
  }
  return { system: sys.kind, idleMiB, idleCpuPercent, loadedMiB, docs: opts.docs, loadSeconds: seconds, rejoin };
}

function rssAll(sys: System): number[] {
  return sys.nodes.map((n) => (n.pid === undefined ? Number.NaN : rssMiB(n.pid)));
}
