// The control plane on three real shoal processes with the in-memory runtime (issue "Workloads,
// part 1"): how long until the leader's loops have done their work.
//
//   npm run bench:control -- [--tasks 1000] [--rounds 3] [--write]
//
// Per round, on a fresh cluster:
// - apply: POST /v1/apply of one service of N replicas, until every task is assigned to a node,
//   and until every task runs;
// - leader kill: kill -9 of the leader, then a scale by one through a survivor; from the kill to
//   the survivors agreeing on a new leader (election), and from the election to the new task
//   being assigned (loops running on the new leader and a pass done: target within 1 s);
// - node death: kill -9 of a follower (its containers die with it), until every task wanted
//   running is assigned to a live node again (target: control.downAfterMs + 1 s).
// --write replaces the "control" section of bench/RESULTS.md.

import os from 'node:os';
import { parseArgs } from 'node:util';
import { once, jsonBody, type Endpoint } from './lib/http.ts';
import { abandonOnSignal, killAllStarted, sleep } from './lib/proc.ts';
import { ShoalCluster } from './lib/shoal-cluster.ts';
import { writeNamedSection } from './lib/report.ts';

const help = `usage: npm run bench:control -- [options]

Three shoal processes with the in-memory runtime (runtime.kind: memory): the time to place and
run a service of N tasks, from a leader's kill -9 to its successor's loops acting, and from a
node's death to its tasks assigned elsewhere.

Options:
  --tasks N        replicas of the service (default 1000)
  --rounds N       rounds, each on a fresh cluster (default 3)
  --down-ms N      control.downAfterMs of the nodes (default 3000, the smallest allowed)
  --write          write the figures to bench/RESULTS.md (between the control markers)
  -h, --help       show this help`;

const timeouts = { heartbeatMs: 100, electionMs: 1000 };
const pollMs = 50;
const waitMs = 120_000;

interface TaskItem {
  id: string;
  nodeId: string | null;
  desired: 'running' | 'shutdown';
  observed: string;
}

interface Round {
  assignedMs: number;
  runningMs: number;
  electionMs: number;
  loopsAfterElectionMs: number;
  replacedMs: number;
  moved: number;
}

async function tasksOf(at: Endpoint): Promise<TaskItem[]> {
  const r = await once<{ tasks: TaskItem[] }>(at, { method: 'GET', path: '/v1/services/bench?consistency=stale' }, 10_000);
  if (r.status !== 200) throw new Error(`GET /v1/services/bench: HTTP ${r.status}`);
  return r.body.tasks;
}

/** Polls `at` until `done(tasks)`; returns the time it first held. */
async function until(at: () => Endpoint, what: string, done: (tasks: TaskItem[]) => boolean): Promise<number> {
  const deadline = performance.now() + waitMs;
  while (performance.now() < deadline) {
    const tasks = await tasksOf(at()).catch(() => undefined);
    if (tasks !== undefined && done(tasks)) return performance.now();
    await sleep(pollMs);
  }
  throw new Error(`${what}: not within ${waitMs} ms`);
}

async function post(at: Endpoint, path: string, body: unknown): Promise<void> {
  const r = await once<unknown>(at, { method: 'POST', path, body: jsonBody(body) }, 30_000);
  if (r.status !== 200) throw new Error(`POST ${path}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
}

const wanted = (tasks: TaskItem[], live: (id: string) => boolean): number =>
  tasks.filter((t) => t.desired === 'running' && t.nodeId !== null && live(t.nodeId)).length;

async function round(tasks: number, downMs: number): Promise<Round> {
  const sys = new ShoalCluster(timeouts, false, undefined, [], {
    runtime: { kind: 'memory' }, control: { suspectAfterMs: Math.min(1000, downMs - 500), downAfterMs: downMs, restartGraceMs: downMs },
    node: { cpuMillis: 64_000, memoryBytes: 128 * 2 ** 30 },
  });
  await sys.start();
  try {
    const leaderIndex = async (): Promise<number> => {
      for (;;) {
        const l = await sys.leader().catch(() => undefined);
        if (l !== undefined) return l;
        await sleep(20);
      }
    };
    let reader = sys.nodes[await leaderIndex()]?.client as Endpoint;
    const spec = { apiVersion: 'shoal/v1', kind: 'Service', name: 'bench', image: 'busybox:local', command: ['sleep', '3600'], replicas: tasks };
    // Every node registered before the apply, so placement spreads over the three.
    await sleep(2000);
    const applied = performance.now();
    await post(reader, '/v1/apply', { documents: [spec] });
    const assignedAt = await until(() => reader, 'all assigned', (ts) => wanted(ts, () => true) === tasks);
    const runningAt = await until(() => reader, 'all running', (ts) => ts.filter((t) => t.desired === 'running' && t.observed === 'running').length === tasks);

    // Leader kill -9: election, then a scale by one that only the new leader's loops can place.
    const old = await leaderIndex();
    const killedAt = performance.now();
    await sys.kill(old);
    const survivors = sys.nodes.map((_, i) => i).filter((i) => i !== old);
    let next = -1;
    while (next < 0) {
      const l = await sys.leader().catch(() => undefined);
      if (l !== undefined && l !== old) next = l;
      else await sleep(10);
    }
    const electedAt = performance.now();
    reader = sys.nodes[next]?.client as Endpoint;
    await post(reader, '/v1/services/bench/scale', { replicas: tasks + 1 });
    const liveIds = new Set(survivors.map((i) => sys.ids[i] as string));
    const oldId = sys.ids[old] as string;
    const placedAt = await until(() => reader, 'scaled task assigned', (ts) => ts.filter((t) => t.desired === 'running' && t.nodeId !== null).length >= tasks + 1);
    // The old leader stays dead: its tasks are replaced after the down timeout.
    const replacedAt = await until(() => reader, 'replacements assigned', (ts) => wanted(ts, (id) => liveIds.has(id)) === tasks + 1);
    const moved = (await tasksOf(reader)).filter((t) => t.desired === 'shutdown' && t.nodeId === oldId).length;
    return {
      assignedMs: assignedAt - applied, runningMs: runningAt - applied,
      electionMs: electedAt - killedAt, loopsAfterElectionMs: placedAt - electedAt,
      replacedMs: replacedAt - killedAt, moved,
    };
  } finally {
    await sys.destroy();
  }
}

const fmt = (n: number): string => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

function table(rounds: Round[], tasks: number, downMs: number): string {
  const row = (name: string, f: (r: Round) => number, target: string): string =>
    `| ${name} | ${fmt(median(rounds.map(f)))} | ${fmt(Math.max(...rounds.map(f)))} | ${target} |`;
  return [
    '## Control plane: three processes, in-memory runtime',
    '',
    `Command: \`npm run bench:control -- --tasks ${tasks} --rounds ${rounds.length} --down-ms ${downMs} --write\`. Machine: ` +
      `${os.cpus()[0]?.model.trim() ?? '?'}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; ` +
      `heartbeat/election ${timeouts.heartbeatMs}/${timeouts.electionMs} ms, control.downAfterMs ${downMs}; ${new Date().toISOString().slice(0, 10)}. ` +
      "Times polled every 50 ms from the API (so up to 50 ms late). The node death is the old leader's: it stays dead after the kill.",
    '',
    '| figure (ms) | median | worst | target |',
    '|---|---:|---:|---|',
    row(`apply of ${tasks} tasks until all assigned`, (r) => r.assignedMs, '–'),
    row(`apply of ${tasks} tasks until all running`, (r) => r.runningMs, '–'),
    row('leader kill -9 until a new leader is agreed', (r) => r.electionMs, '–'),
    row('new leader elected until its loops placed a task (scale +1 written, placed)', (r) => r.loopsAfterElectionMs, '≤ 1000'),
    row('node death until its tasks are assigned elsewhere', (r) => r.replacedMs, `≤ ${downMs + 1000} (down timeout + 1 s)`),
    '',
    `Tasks moved off the dead node per round: ${rounds.map((r) => r.moved).join(', ')}.`,
  ].join('\n');
}


async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      tasks: { type: 'string', default: '1000' }, rounds: { type: 'string', default: '3' }, 'down-ms': { type: 'string', default: '3000' },
      write: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (v.help) { console.log(help); return; }
  const whole = (s: string, name: string, min: number): number => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number of ${min} or more, not ${JSON.stringify(s)}`);
    return n;
  };
  const tasks = whole(v.tasks, 'tasks', 1);
  const rounds = whole(v.rounds, 'rounds', 1);
  const downMs = whole(v['down-ms'], 'down-ms', 3000);
  abandonOnSignal();
  const out: Round[] = [];
  for (let i = 0; i < rounds; i++) {
    console.error(`round ${i + 1} of ${rounds}...`);
    out.push(await round(tasks, downMs));
    console.error(JSON.stringify(out[out.length - 1]));
  }
  const text = table(out, tasks, downMs);
  console.log(text);
  if (v.write) writeNamedSection('control', text);
}

main().catch((err: unknown) => {
  console.error(`bench:control: ${(err as Error).message}`);
  killAllStarted();
  process.exit(1);
});
