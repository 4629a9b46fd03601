// The failover drills' figures (shoal drill, docs/operations.md "Failover drills"): three
// `shoal serve` processes under the `shoal dev` supervisor (which starts again a node that exits
// asking to be restarted, as systemd does), default Raft timing (heartbeat 100 ms, election
// timeout 1000 ms, as the etcd comparison uses), the in-memory runtime with the example service
// (three replicas). Each drill runs --rounds times; the table has the median and range of each
// figure, the sums of the counts, and etcd's figure where the side-by-side benchmark has one.
//
//   npm run bench:drills -- [--rounds 3] [--duration 3] [--drills leader-kill,...] [--write]
//
// --write replaces the "drills" section of bench/RESULTS.md.

import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { DevSupervisor, type DevNode } from '../src/cli/dev-supervisor.ts';
import { keepReport, runDrill } from '../src/cli/drill-run.ts';
import { main } from '../src/cli/main.ts';
import { drillNames, type DrillName, type DrillReport } from '../src/node/drill/drill-report.ts';
import { initNode } from '../src/node/identity.ts';
import { freePort, sleep } from './lib/proc.ts';
import { machine, writeNamedSection } from './lib/report.ts';

const help = `usage: npm run bench:drills -- [options]

Runs each failover drill against a three-process shoal cluster under the dev supervisor and
prints one row per drill: time to a new leader, longest write gap, recovery and services-back
times (median and range over the rounds), writes acknowledged and lost, reads that went
backwards, workloads restarted and duplicated (sums).

Options:
  --rounds N       rounds per drill (default 3)
  --duration S     how long each fault lasts, in seconds (default 3)
  --drills LIST    which drills (default all: ${drillNames.join(',')})
  --write          write the table to bench/RESULTS.md (between the drills markers)
  -h, --help       show this help`;

/** etcd's figures for the same fault, from the side-by-side benchmark (bench/RESULTS.md, etcd-compare). */
const etcdEquivalent: Partial<Record<DrillName, string>> = {
  'leader-kill': 'kill -9 of the leader: new leader 1,274 ms, write gap 2,083 ms (median of 3; etcd-compare section, same timing, another run)',
};

async function startCluster(root: string): Promise<{ supervisor: DevSupervisor; nodes: DevNode[] }> {
  const nodes: DevNode[] = [];
  for (let i = 0; i < 3; i++) {
    const name = `n${i + 1}`;
    const dir = path.join(root, name);
    const identity = await initNode({ dataDir: dir, name, ...(i > 0 ? { caFrom: path.join(root, 'n1') } : {}) });
    nodes.push({ id: identity.id, name, dir, apiAddress: `127.0.0.1:${await freePort()}`, peerAddress: `127.0.0.1:${await freePort()}` });
  }
  const bootstrap = nodes.map(({ id, name, apiAddress, peerAddress }) => ({ id, name, apiAddress, peerAddress }));
  for (const n of nodes) {
    writeFileSync(path.join(n.dir, 'shoal.yaml'), stringify({
      dataDir: '.', api: { listen: n.apiAddress }, peer: { listen: n.peerAddress }, bootstrap, logLevel: 'warn',
      runtime: { kind: 'memory' }, control: { suspectAfterMs: 2000, downAfterMs: 4000, restartGraceMs: 4000 },
    }));
  }
  const logs = createWriteStream(path.join(root, 'nodes.log'));
  const supervisor = new DevSupervisor(nodes, () => undefined, logs as unknown as NodeJS.WriteStream);
  supervisor.startAll();
  return { supervisor, nodes };
}

async function applyExample(addr: string): Promise<void> {
  const example = fileURLToPath(new URL('../docs/examples/web.yaml', import.meta.url));
  for (let attempt = 0; attempt < 60; attempt++) {
    const log = console.log;
    console.log = () => undefined;
    const code = await main(['apply', '-f', example, '--timeout', '60s', '--addr', addr]).finally(() => { console.log = log; });
    if (code === 0) return;
    await sleep(1000);
  }
  throw new Error('could not apply the example service');
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? s[(s.length - 1) / 2] as number : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
};
const fmt = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');

function figure(values: (number | null)[]): string {
  const xs = values.filter((v): v is number => v !== null);
  if (xs.length === 0) return '–';
  const nulls = values.length - xs.length;
  return `${fmt(median(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})${nulls > 0 ? ` [${nulls} none]` : ''}`;
}

function table(rows: Map<DrillName, DrillReport[]>): string {
  const sum = (rs: DrillReport[], f: (r: DrillReport) => number): string => fmt(rs.reduce((a, r) => a + f(r), 0));
  const lines = [
    '| drill | rounds | passed | new leader ms | longest write gap ms | target recovered ms | services back ms | writes acked | lost | reads | backwards | tasks restarted | duplicated | etcd |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const [name, rs] of rows) {
    lines.push(`| ${name} | ${rs.length} | ${rs.filter((r) => r.ok).length} | ${figure(rs.map((r) => r.newLeaderMs))} | ${figure(rs.map((r) => r.longestWriteGapMs))} | ${figure(rs.map((r) => r.recoveryMs))} | ${figure(rs.map((r) => r.servicesBackMs))} | ${sum(rs, (r) => r.writes.acknowledged)} | ${sum(rs, (r) => r.writes.lost)} | ${sum(rs, (r) => r.reads.done)} | ${sum(rs, (r) => r.reads.backwards)} | ${sum(rs, (r) => r.workloads.restarted)} | ${sum(rs, (r) => r.workloads.duplicated)} | ${etcdEquivalent[name] ?? '–'} |`);
  }
  return lines.join('\n');
}

async function main2(): Promise<void> {
  const { values } = parseArgs({ options: {
    rounds: { type: 'string', default: '3' }, duration: { type: 'string', default: '3' }, drills: { type: 'string' },
    write: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  } });
  if (values.help) {
    console.log(help);
    return;
  }
  const rounds = Number(values.rounds);
  const seconds = Number(values.duration);
  const drills = (values.drills?.split(',') ?? [...drillNames]) as DrillName[];
  for (const d of drills) if (!drillNames.includes(d)) throw new Error(`unknown drill ${d}; the drills are ${drillNames.join(', ')}`);
  const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-drills-'));
  const { supervisor, nodes } = await startCluster(root);
  const rows = new Map<DrillName, DrillReport[]>();
  try {
    const addr = (nodes[0] as DevNode).apiAddress;
    await applyExample(addr);
    for (const name of drills) {
      for (let round = 1; round <= rounds; round++) {
        const report = await runDrill({ addr, drill: name, seconds, recoverTimeoutMs: 60_000, allowOutage: false, budgetWaitMs: 60_000, onProgress: (l) => console.error(`  ${l}`) });
        await keepReport(nodes, report);
        console.log(`${name} round ${round}: ${report.ok ? 'passed' : 'FAILED'}, new leader ${report.newLeaderMs ?? '-'} ms, gap ${report.longestWriteGapMs} ms, lost ${report.writes.lost}, backwards ${report.reads.backwards}${report.problems.length > 0 ? `; ${report.problems.join('; ')}` : ''}`);
        rows.set(name, [...(rows.get(name) ?? []), report]);
        await sleep(2000);
      }
    }
  } finally {
    await supervisor.stopAll();
    rmSync(root, { recursive: true, force: true });
  }
  const m = machine('not used');
  const body = `## Failover drills (shoal drill; three processes under the dev supervisor, one machine)

Machine: ${m.cpu}, ${m.cores} cores, ${m.ramGiB} GiB RAM, ${m.kernel}, Node ${m.node}. Raft timing: heartbeat 100 ms, election timeout 1000 ms (the defaults).
Each fault lasts ${seconds} s (leader-kill: until the supervisor restarts the node); ${rounds} rounds per drill; the probe: 6 workers over the three nodes, each creating an ack-log document, writing a shared register and reading it back (linearizable), moving to the next node after a failure. Times are from the fault; median (range) over the rounds, counts summed. "services back" is 0 when no service was seen short of its replica count; each drill waits until every service has stayed at its count for 5 s after the target recovered. node-reboot is emulated (the process exits, and its next start waits until the fault's length has passed). On loopback an isolated node drops only its inbound peer port (docs/operations.md, "Failover drills"). The in-memory runtime loses a killed node's containers, so a kill restarts its tasks.

${table(rows)}

Run with \`npm run bench:drills -- --write\`.`;
  console.log(`\n${body}`);
  if (values.write) writeNamedSection('drills', body);
}

main2().then(() => process.exit(0), (err: unknown) => {
  console.error(err);
  process.exit(1);
});
