// Issue 36's soak: node health with the release's defaults must take nothing slow for dead.
// Three machines in network namespaces (bench/lib/machine-lab.ts, the in-memory runtime), the
// services of bench/node-loss.ts (web on every machine, one exclusive db), and for the whole run:
//
//   - two CPU hogs beside the nodes (busy loops in the root namespace, nice 0): both cores busy;
//   - a write load (two clients writing documents through every node in turn);
//   - one machine's link degraded for 3 minutes of every 10 (from minute 2): 1 % packet loss and
//     a 1 Mbit/s link kept full, about 200 ms of queueing both ways (tc netem is not built into
//     this kernel; machine-lab.ts says how);
//   - a node SIGSTOPped for 1 s every minute (the nodes in turn);
//   - a node's durable writes stalled for 2 s every 45 s (the nodes in turn; the storage seam,
//     through POST /v1/drill/actions disk-stall), as an SD card that stalls.
//
// Counted: nodes declared down (their epoch raised: every one is false here, nothing died),
// tasks restarted (a web or db slot given a new task, or a task whose container changed), lease
// expiries (the agents' "ran out" lines), and, to show the faults bit, suspect verdicts, leader
// changes and node-health hand-overs. Not a test: it gates nothing; its result goes to
// bench/RESULTS.md.
//
//   flock /tmp/shoal-heavy.lock npm run soak:nodeloss -- --minutes 30 [--write]

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import type { TaskItem } from '../src/api/control-views.ts';
import { nodeHealthDefaults } from '../src/control/node-health.ts';
import { leaseDefaults } from '../src/resources/lease.ts';
import { call, sleep } from '../test/faults/http.ts';
import type { MachineLab } from './lib/machine-lab.ts';
import { startLab, tasksOf } from './node-loss.ts';
import { writeNamedSection } from './lib/report.ts';

interface Counts {
  writesOk: number;
  writesFailed: number;
  pauses: number;
  stalls: number;
  linkFaultMinutes: number;
  pingMs: number[];
  suspects: number;
  leaderChanges: number;
}

/** Per slot of web and db: the task running it and its container. */
async function slots(lab: MachineLab): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const svc of ['web', 'db']) {
    const ts: TaskItem[] = (await tasksOf(lab, svc)) ?? [];
    for (const t of ts.filter((x) => x.desired === 'running')) out.set(`${svc}.${String(t.slot)}`, `${t.id}/${t.record.containerId ?? '-'}`);
  }
  return out;
}

async function epochs(lab: MachineLab): Promise<Map<string, { state: string; epoch: number }>> {
  const r = await lab.api('GET', '/v1/nodes');
  const out = new Map<string, { state: string; epoch: number }>();
  if (r.kind === 'answer' && r.status === 200) {
    for (const i of (r.body as { items: { id: string; record: { state: string; epoch: number } }[] }).items) out.set(i.id, i.record);
  }
  return out;
}

function writer(lab: MachineLab, counts: Counts, running: () => boolean, offset: number): Promise<void> {
  return (async () => {
    let i = offset;
    while (running()) {
      const live = lab.live();
      const m = live[i % Math.max(1, live.length)];
      i++;
      if (m === undefined) {
        await sleep(100);
        continue;
      }
      const r = await call(m.api, `/v1/docs/soak/k${i % 500}`, { method: 'PUT', body: { i, at: Date.now(), pad: 'x'.repeat(200) }, timeoutMs: 5000 });
      if (r.kind === 'answer' && r.status === 200) counts.writesOk++;
      else counts.writesFailed++;
      await sleep(40);
    }
  })();
}

function hogs(): ChildProcess[] {
  return [0, 1].map(() => spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { minutes: { type: 'string', default: '30' }, write: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } } });
  if (values.help) {
    console.log('usage: npm run soak:nodeloss -- [--minutes 30] [--write]   (root; flock /tmp/shoal-heavy.lock)');
    return;
  }
  const minutes = Number(values.minutes);
  const lab = await startLab('memory', 'shoal-soak-');
  const counts: Counts = { writesOk: 0, writesFailed: 0, pauses: 0, stalls: 0, linkFaultMinutes: 0, pingMs: [], suspects: 0, leaderChanges: 0 };
  const startedAt = new Date();
  const before = await slots(lab);
  const epochsBefore = await epochs(lab);
  const cpu = hogs();
  let running = true;
  const writers = [writer(lab, counts, () => running, 0), writer(lab, counts, () => running, 1)];
  const t0 = performance.now();
  const faulty = lab.machines[2];
  let linkOn = false;
  let lastState = new Map<string, string>();
  let lastLeader: string | null = null;
  let nextPause = 30_000;
  let nextStall = 15_000;
  let pauseTurn = 0;
  let stallTurn = 1;
  let minutesReported = 0;
  try {
    while (performance.now() - t0 < minutes * 60_000) {
      const t = performance.now() - t0;
      const minute = Math.floor(t / 60_000);
      const wantLink = minute % 10 >= 2 && minute % 10 < 5;
      if (faulty !== undefined && wantLink !== linkOn) {
        await lab.linkFault(faulty, wantLink);
        linkOn = wantLink;
        console.log(`${(t / 1000).toFixed(0)} s: link fault on ${faulty.name} ${linkOn ? 'on' : 'off'}`);
      }
      if (linkOn && faulty !== undefined && Math.floor(t / 1000) % 20 === 0) {
        const p = lab.pingMs(faulty);
        if (p !== null) counts.pingMs.push(p);
      }
      if (t >= nextPause) {
        const m = lab.machines[pauseTurn++ % lab.machines.length];
        if (m !== undefined) {
          lab.pause(m);
          await sleep(1_000);
          lab.resume(m);
          counts.pauses++;
        }
        nextPause += 60_000;
      }
      if (t >= nextStall) {
        const m = lab.machines[stallTurn++ % lab.machines.length];
        if (m !== undefined && (await lab.diskStall(m, 2)).kind === 'answer') counts.stalls++;
        nextStall += 45_000;
      }
      const now = await epochs(lab);
      for (const [id, r] of now) {
        if (r.state === 'suspect' && lastState.get(id) !== 'suspect') counts.suspects++;
      }
      lastState = new Map([...now].map(([id, r]) => [id, r.state]));
      const h = await lab.api('GET', '/healthz');
      const leader = h.kind === 'answer' ? ((h.body as { leader?: string | null }).leader ?? null) : null;
      if (leader !== null && lastLeader !== null && leader !== lastLeader) counts.leaderChanges++;
      if (leader !== null) lastLeader = leader;
      await sleep(500);
      const done = Math.floor((performance.now() - t0) / 60_000);
      if (done > minutesReported) console.log(`minute ${done} done: ${counts.writesOk} writes, ${counts.suspects} suspect verdicts seen, ${counts.leaderChanges} leader changes`);
      minutesReported = done;
    }
  } finally {
    running = false;
    for (const h of cpu) h.kill('SIGKILL');
    if (linkOn && faulty !== undefined) await lab.linkFault(faulty, false).catch(() => undefined);
    for (const m of lab.machines) lab.resume(m);
  }
  await Promise.all(writers);
  counts.linkFaultMinutes = Array.from({ length: minutes }, (_, m) => m % 10 >= 2 && m % 10 < 5).filter(Boolean).length;
  // Settle: everything back to ready before the final count.
  await lab.waitFor('every node ready', async () => ([...(await epochs(lab)).values()].every((r) => r.state === 'ready') ? true : undefined), 60_000).catch(() => undefined);
  const after = await slots(lab);
  const epochsAfter = await epochs(lab);
  const logs = lab.machines.map((m) => readFileSync(m.log, 'utf8'));
  await lab.destroy();

  const falseDowns = [...epochsAfter].reduce((n, [id, r]) => n + (r.epoch - (epochsBefore.get(id)?.epoch ?? 0)), 0);
  const restarted = [...before].filter(([slot, task]) => after.get(slot) !== task).length;
  const lines = (re: RegExp): number => logs.reduce((n, l) => n + (l.match(re)?.length ?? 0), 0);
  const expiries = lines(/exclusive-task lease of epoch \d+ ran out/g);
  const handOvers = lines(/handing leadership to/g);
  const healthDowns = lines(/node health: \S+ \S+ -> down/g);
  const healthSuspects = lines(/node health: \S+ ready -> suspect/g);
  const pings = counts.pingMs.length === 0 ? '–' : `${Math.min(...counts.pingMs).toFixed(0)}-${Math.max(...counts.pingMs).toFixed(0)} ms`;
  const h = nodeHealthDefaults;
  const text = [
    '## Soak: no false "down" under load and faults (issue 36; three machines in namespaces)',
    '',
    `Command: \`flock /tmp/shoal-heavy.lock npm run soak:nodeloss -- --minutes ${minutes} --write\``,
    `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model.trim() ?? 'unknown'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${os.type()} ${os.release()}; shared with other work`,
    `Started: ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${minutes} minutes`,
    '',
    `Defaults: suspect ${h.suspectAfterMs} ms, down ${h.downAfterMs} ms, restart grace ${h.restartGraceMs} ms, lease ${leaseDefaults.leaseMs} ms. `
      + 'Three `shoal serve` processes (in-memory runtime) with `web` (3 replicas) and an exclusive `db`; throughout: two CPU hogs (busy loops, nice 0) beside them, '
      + `two clients writing (${counts.writesOk} writes acknowledged, ${counts.writesFailed} failed or timed out), `
      + `a node SIGSTOPped for 1 s every minute (${counts.pauses} times), a node's durable writes stalled for 2 s every 45 s (${counts.stalls} times), `
      + `and n3's link degraded for ${counts.linkFaultMinutes} of the ${minutes} minutes: 1 % loss (nftables) and a saturated 1 Mbit/s link with a 200 ms queue (tbf), both ways `
      + `(ping from the host ${pings}; tc netem is not built into this kernel).`,
    '',
    '| figure | count | target |',
    '|---|---:|---:|',
    `| nodes declared down (epoch raised) | ${falseDowns} | 0 |`,
    `| web and db tasks restarted or replaced | ${restarted} of ${before.size} | 0 |`,
    `| exclusive lease expiries | ${expiries} | 0 |`,
    `| "down" verdicts in the leaders' logs | ${healthDowns} | 0 |`,
    `| suspect verdicts (the leaders' logs; seen by polling every ~0.5 s: ${counts.suspects}) | ${healthSuspects} | – |`,
    `| leader changes seen | ${counts.leaderChanges} | – |`,
    `| node-health hand-overs | ${handOvers} | – |`,
  ].join('\n');
  console.log(text);
  console.log(`logs: ${lab.opts.runDir}`);
  if (values.write) writeNamedSection('soak-node-loss', text);
}

await main();
