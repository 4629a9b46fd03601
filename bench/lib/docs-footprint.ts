// The memory of three shoal nodes and three etcd members after N documents (bench/footprint.ts
// `--docs N`, issue 45: RSS <= 1.5x etcd's), with the breakdown of where a node's memory goes.
// The same load as `npm run bench -- --only memory` (bench/lib/memory-rejoin.ts): N documents of
// a 256-character value written by 64 clients to the leader, RSS read 3 s after the last write;
// then again 35 s later (after the next snapshot and log compaction), with each shoal node's V8
// figures (the probe's SIGUSR2, no GC of ours) and a heap snapshot of the leader.

import { cpuMs, rssMiB, sleep } from './proc.ts';
import type { System } from './system.ts';
import { fill } from './throughput.ts';
import { docsCollection } from './memory-rejoin.ts';

export interface DocsFigures {
  system: string;
  loadSeconds: number;
  /** RSS of each process 3 s after the last write (as bench/compare.ts reads it). */
  rssAt3s: number[];
  /** RSS of each process 35 s after the last write. */
  rssAt35s: number[];
  /** CPU of each process during the load (ms). */
  loadCpuMs: number[];
}

/** The agreed leader, asked again while the answers time out (a busy shared machine). */
export async function agreedLeader(sys: System): Promise<number> {
  for (let i = 0; i < 120; i++) {
    const l = await sys.leader().catch(() => undefined);
    if (l !== undefined) return l;
    await sleep(500);
  }
  throw new Error(`${sys.kind}: no agreed leader within 60 s`);
}

const rssAll = (sys: System): number[] => sys.nodes.map((n) => (n.pid === undefined ? Number.NaN : rssMiB(n.pid)));

/** Fills `sys` (started, nothing written) with `docs` documents; RSS 3 s and 35 s after; `between` runs after the 3 s reading. */
export async function docsFootprint(sys: System, docs: number, between: () => Promise<void> = async () => undefined): Promise<DocsFigures> {
  await sleep(3000);
  const leader = await agreedLeader(sys);
  const pids = sys.nodes.map((n) => n.pid ?? 0);
  const cpu0 = pids.map(cpuMs);
  const { seconds } = await fill(sys, leader, docsCollection, docs, 64);
  const loadCpuMs = pids.map((p, i) => cpuMs(p) - (cpu0[i] ?? 0));
  const t = performance.now();
  await sleep(3000);
  const rssAt3s = rssAll(sys);
  await between();
  await sleep(Math.max(0, 35_000 - (performance.now() - t)));
  const rssAt35s = rssAll(sys);
  return { system: sys.kind, loadSeconds: seconds, rssAt3s, rssAt35s, loadCpuMs };
}
