// One fault run: a three-node cluster in network namespaces, register clients and ack writers
// under a seeded nemesis, then everything healed, the whole cluster killed and restarted, and
// the checks:
//
//   1. the history of register operations is linearizable (checkLinearizable, which must also
//      finish within its budget: an undecided check fails the run);
//   2. every member, after /readyz?sync, holds the same value of each register in its local store,
//      the value of a final linearizable read recorded in the history, and one that some write or
//      cas tried to write;
//   3. every acknowledged ack-log document is present on every member;
//   4. no node exited unless the nemesis killed it, the nemesis could do everything it asked
//      (membership changes, leadership transfers), and a leader came back after healing.
//
// A failed run keeps its directory (history.jsonl, nemesis.jsonl, logs/, data/, summary.json)
// and says where; a passing run deletes it unless asked to keep it.

import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { SeededPrng } from '../../src/raft/prng.ts';
import { AckWriters, listIds } from './ack-writers.ts';
import { FaultCluster, type FaultNode } from './fault-cluster.ts';
import { HistoryWriter, pairOperations, readHistory } from './history.ts';
import { call, docValue } from './http.ts';
import { checkLinearizable, describeOperation } from './linearizability.ts';
import { Nemesis, faultKinds, type FaultKind } from './nemesis.ts';
import { RegisterClients, type ClientStats, type Target } from './register-clients.ts';

export interface RunOptions {
  seed: number;
  /** How long the nemesis runs; it always finishes one whole cycle of every fault kind. */
  durationMs: number;
  /** Parent of the run's directory, e.g. test-results. */
  resultsDir: string;
  /** Keep the run's directory even when it passes. */
  keep?: boolean;
  workers?: number;
  keys?: number;
  /** Budget of the linearizability check. */
  checkerTimeoutMs?: number;
  /** Progress lines. */
  log?: (line: string) => void;
  /** How long each fault is held and the quiet after it, [min, max] ms; defaults 2-4 s and 1-2 s. */
  holdMs?: readonly [number, number];
  quietMs?: readonly [number, number];
  /** Self-check of the harness: plain reads use ?consistency=stale, which is not linearizable
   *  under partitions, so such a run is expected to fail. */
  staleReads?: boolean;
}

export interface RunResult {
  ok: boolean;
  seed: number;
  /** The run's directory; it exists only when `kept`. */
  dir: string;
  kept: boolean;
  problems: string[];
  faults: Record<FaultKind, number>;
  clients: ClientStats;
  /** Operations completed `ok`, all kinds. */
  okOps: number;
  acks: { attempted: number; acked: number };
  checker: { verdict: 'ok' | 'fail' | 'unknown' | 'not run'; ms: number; events: number };
  durationMs: number;
}

export const raftTimings = { tickMs: 50, heartbeatIntervalMs: 50, electionTimeoutMs: 500 };
const requestTimeoutMs = 3000;
const recoverMs = 60_000;
const collection = 'reg';
const ackCollection = 'acks';

export async function runFaults(opts: RunOptions): Promise<RunResult> {
  const started = performance.now();
  const log = opts.log ?? (() => undefined);
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
  const dir = path.resolve(opts.resultsDir, `faults-${opts.seed}-${stamp}`);
  mkdirSync(dir, { recursive: true });
  const prng = new SeededPrng(opts.seed);
  const runId = `r${opts.seed}-${stamp}`;
  const keys = Array.from({ length: opts.keys ?? 5 }, (_, i) => `k${i}`);
  const problems: string[] = [];
  let cluster: FaultCluster;
  try {
    cluster = await FaultCluster.create({
      runDir: dir, voters: 3, spares: 1, timings: raftTimings, proposalTimeoutMs: 2000,
      // Small enough that snapshots, compaction and InstallSnapshot happen during a run, each
      // node's at its own moments (the interval's random factor).
      snapshotEntries: 2000, snapshotIntervalMs: 2000, logKeepEntries: 500,
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const history = HistoryWriter.open(path.join(dir, 'history.jsonl'));
  const targets = (): Target[] => cluster.members().map((n) => ({ name: n.name, apiAddress: n.apiAddress }));
  const clients = new RegisterClients({
    workers: opts.workers ?? 8, keys, collection, history, prng: prng.fork(), targets, requestTimeoutMs, thinkMsMax: 20, runId,
    readConsistency: opts.staleReads === true ? 'stale' : 'linearizable',
  });
  const acks = new AckWriters({ writers: 2, collection: ackCollection, runId, targets, requestTimeoutMs, intervalMs: 10 });
  const nemesis = new Nemesis(cluster, prng.fork(), { holdMs: opts.holdMs ?? [2000, 4000], quietMs: opts.quietMs ?? [1000, 2000], logPath: path.join(dir, 'nemesis.jsonl') });
  const parts: RunParts = { cluster, clients, acks, nemesis, keys, historyPath: history.path, problems, log, opts };
  try {
    await exercise(parts);
  } catch (err) {
    problems.push(`harness: ${(err as Error).stack ?? String(err)}`);
  } finally {
    nemesis.stop();
    await clients.stop().catch(() => undefined);
    await acks.stop().catch(() => undefined);
    history.close();
    await cluster.destroy();
  }
  problems.push(...cluster.unexpectedExits.map((e) => `${e.node} (${e.id}) exited by itself (code ${e.code}, signal ${e.signal}) at ${e.time.toFixed(0)} ms; see logs/${e.node}.log`));
  problems.push(...clients.stats.anomalies.slice(0, 20).map((a) => `client: ${a}`));
  const checker = checkHistory(history.path, opts.checkerTimeoutMs ?? 300_000, problems, log);
  const ok = problems.length === 0;
  const okOps = Object.values(clients.stats.byOutcome).reduce((s, o) => s + o.ok, 0);
  const result: RunResult = {
    ok, seed: opts.seed, dir, kept: !ok || opts.keep === true, problems, faults: { ...nemesis.done }, clients: clients.stats, okOps,
    acks: { attempted: acks.attempted, acked: acks.acked.size }, checker, durationMs: performance.now() - started,
  };
  writeFileSync(path.join(dir, 'summary.json'), `${JSON.stringify(result, null, 2)}\n`);
  if (!result.kept) rmSync(dir, { recursive: true, force: true });
  return result;
}

interface RunParts {
  cluster: FaultCluster;
  clients: RegisterClients;
  acks: AckWriters;
  nemesis: Nemesis;
  keys: string[];
  historyPath: string;
  problems: string[];
  log: (line: string) => void;
  opts: RunOptions;
}

/** Start, faults, heal, whole-cluster crash and restart under load, then checks 2 and 3. */
async function exercise(p: RunParts): Promise<void> {
  const { cluster, clients, acks, nemesis, problems, log, opts } = p;
  log(`run ${opts.seed}: network ${cluster.lab.bridge} (${cluster.lab.hostIp}/24)`);
  for (const n of cluster.members()) await cluster.start(n);
  await cluster.waitForLeader(recoverMs);
  for (const n of cluster.members()) await cluster.waitReady(n, recoverMs);
  clients.start();
  acks.start();
  log(`run ${opts.seed}: cluster up, clients running; nemesis for ${Math.round(opts.durationMs / 1000)} s`);
  await nemesis.run(opts.durationMs);
  problems.push(...nemesis.errors.map((e) => `nemesis: ${e}`));
  await nemesis.healAll();
  await expectRecovery(cluster, problems, 'after healing every fault');
  // Under load, so that writes acknowledged just before the crash must survive it (fsync).
  log(`run ${opts.seed}: healed; killing (-9) and restarting the whole cluster under load`);
  for (const n of cluster.members()) await cluster.kill(n);
  for (const n of cluster.members()) await cluster.start(n);
  const recovered = await expectRecovery(cluster, problems, 'after restarting the whole cluster');
  await clients.stop();
  await acks.stop();
  if (recovered) {
    await checkFinalState(cluster, clients, p.keys, p.historyPath, problems);
    await checkAcks(cluster, acks, problems);
  }
}

/** A leader agreed by every member and every member ready; records a problem and returns false if not. */
async function expectRecovery(cluster: FaultCluster, problems: string[], when: string): Promise<boolean> {
  try {
    await cluster.waitForLeader(recoverMs);
    for (const n of cluster.members()) await cluster.waitReady(n, recoverMs);
    return true;
  } catch (err) {
    problems.push(`liveness ${when}: ${(err as Error).message}`);
    return false;
  }
}

/** Check 2: every member's local value of each register is the final read's, and was written. */
async function checkFinalState(cluster: FaultCluster, clients: RegisterClients, keys: string[], historyPath: string, problems: string[]): Promise<void> {
  const finals = await clients.finalReads(recoverMs);
  for (const key of keys) if (!finals.has(key)) problems.push(`final read of ${key} never succeeded`);
  const written = new Set<string>();
  // The writer appends synchronously, so the file already holds every event recorded.
  for (const e of pairOperations(readHistory(historyPath).events)) {
    if (e.op !== 'read' && e.outcome !== 'fail' && typeof e.value === 'string') written.add(e.value);
  }
  for (const node of cluster.members()) {
    // Writes went on after the recovery check: let the node apply all that is committed first.
    await cluster.waitReady(node, recoverMs);
    for (const key of keys) {
      const local = await localValue(node, key);
      const final = finals.get(key);
      if (local === undefined) problems.push(`${node.name}: could not read ${key} from its local store`);
      else if (final !== undefined && local !== final) problems.push(`${node.name}: local ${key} = ${JSON.stringify(local)} but the final linearizable read saw ${JSON.stringify(final)}`);
      else if (local !== null && !written.has(local)) problems.push(`${node.name}: ${key} = ${JSON.stringify(local)}, a value no operation wrote`);
    }
  }
}

async function localValue(node: FaultNode, key: string): Promise<string | null | undefined> {
  const r = await call(node.apiAddress, `/v1/docs/${collection}/${key}?consistency=stale`, { timeoutMs: 5000 });
  if (r.kind !== 'answer') return undefined;
  if (r.status === 404) return null;
  return r.status === 200 ? docValue(r.body) : undefined;
}

/** Check 3: every acknowledged ack document on every member. */
async function checkAcks(cluster: FaultCluster, acks: AckWriters, problems: string[]): Promise<void> {
  if (acks.acked.size === 0) problems.push('no ack-log write was acknowledged');
  for (const node of cluster.members()) {
    await cluster.waitReady(node, recoverMs);
    const missing = acks.missingFrom(await listIds(node.apiAddress, ackCollection));
    if (missing.length > 0) problems.push(`${node.name} lost ${missing.length} acknowledged ack-log writes, e.g. ${missing.slice(0, 5).join(', ')}`);
  }
}

/** Check 1, on the file as written: it must parse, and be linearizable within the budget. */
function checkHistory(file: string, timeoutMs: number, problems: string[], log: (l: string) => void): RunResult['checker'] {
  const parsed = readHistory(file);
  for (const e of parsed.errors.slice(0, 10)) problems.push(`history line ${e.line}: ${e.message}`);
  const t0 = performance.now();
  let verdict: RunResult['checker']['verdict'];
  try {
    const r = checkLinearizable(parsed.events, { timeoutMs });
    if (r.ok === true) verdict = 'ok';
    else if (r.ok === 'unknown') {
      verdict = 'unknown';
      problems.push(`linearizability undecided: the check of key ${r.key} ran out of its ${timeoutMs} ms budget; re-check the kept history with a larger --timeout-ms`);
    } else {
      verdict = 'fail';
      problems.push(`not linearizable: key ${r.key}: ${r.reason}\n    ${r.ops.map(describeOperation).join('\n    ')}`);
    }
  } catch (err) {
    verdict = 'fail';
    problems.push(`history breaks the recording rules: ${(err as Error).message}`);
  }
  const ms = performance.now() - t0;
  log(`linearizability: ${verdict} for ${parsed.events.length} events in ${(ms / 1000).toFixed(1)} s`);
  return { verdict, ms, events: parsed.events.length };
}

export function summarize(r: RunResult): string {
  const s = r.clients.byOutcome;
  const ops = (['read', 'write', 'cas'] as const).map((k) => `${k} ${s[k].ok}/${s[k].fail}/${s[k].info}`).join(', ');
  const faults = faultKinds.map((k) => `${k} ${r.faults[k]}`).join(', ');
  return [
    `seed ${r.seed}: ${r.ok ? 'PASSED' : 'FAILED'} in ${(r.durationMs / 1000).toFixed(0)} s`,
    `  operations (ok/fail/info): ${ops}; ${r.okOps} ok in all, ${r.clients.processes} processes`,
    `  ack log: ${r.acks.acked} of ${r.acks.attempted} acknowledged, all checked on every member`,
    `  faults: ${faults}`,
    `  linearizability: ${r.checker.verdict}, ${r.checker.events} events in ${(r.checker.ms / 1000).toFixed(1)} s`,
    ...r.problems.map((p) => `  PROBLEM: ${p}`),
    ...(r.kept ? [`  kept: ${r.dir}`] : []),
  ].join('\n');
}
