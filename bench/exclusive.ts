// How fast an exclusive service comes back when the node running it freezes (issue 29): three
// real `shoal serve` processes on the machine's Docker daemon, the fastest node-health timeouts
// allowed (suspect 1 s, down 3 s) and the default lease (10 s + margin 3.2 s). Each round is a
// fresh cluster: apply an exclusive service, SIGSTOP the shoal process of the node running it,
// and read from Docker's own event times when the old container died (its fence, or nobody) and
// when the new one started elsewhere.
//
//   flock /tmp/shoal-heavy.lock nice -n 19 npx tsx bench/exclusive.ts [--rounds 3] [--write]
//
// --write replaces the "exclusive" section of bench/RESULTS.md.

import { parseArgs } from 'node:util';
import { leaseDefaults, leaseMarginMs, replaceAfterMs } from '../src/resources/lease.ts';
import { runsOf } from '../test/system/container-events.ts';
import { DockerSystem, serviceDoc } from '../test/system/docker-system.ts';
import { writeNamedSection } from './lib/report.ts';

const nsPerMs = 1_000_000n;

interface Round {
  /** From the SIGSTOP to the old container's death (the fence). */
  killedMs: number;
  /** From the SIGSTOP to the new container's start on another node. */
  backMs: number;
  overlapped: boolean;
}

async function round(): Promise<Round> {
  const sys = new DockerSystem({ control: { suspectAfterMs: 1_000, downAfterMs: 3_000, restartGraceMs: 3_000 } });
  try {
    await sys.start();
    await sys.apply(serviceDoc('db', { exclusive: true }));
    const s = await sys.waitConverged('db');
    const leader = await sys.leader();
    let task = s.tasks.find((t) => t.desired === 'running');
    if (task?.nodeId === leader.id) {
      await sys.api('POST', '/v1/cluster/leader', {});
      await sys.waitFor('a new leader', async () => ((await sys.leader()).id !== leader.id ? true : undefined));
      task = (await sys.waitConverged('db')).tasks.find((t) => t.desired === 'running');
    }
    const victim = sys.cluster.nodes.find((n) => n.id === task?.nodeId);
    const pid = victim?.proc?.pid;
    const log = sys.events;
    if (victim === undefined || pid === undefined || log === undefined) throw new Error('no victim');
    await log.catchUp(sys.cluster.clusterId);
    const old = runsOf(log.events).find((r) => r.service === 'db' && r.endNs === null);
    const at = BigInt(Date.now()) * nsPerMs;
    process.kill(pid, 'SIGSTOP');
    try {
      const fresh = await sys.waitFor('db back elsewhere', async () => {
        await log.catchUp(sys.cluster.clusterId);
        return runsOf(log.events).find((r) => r.service === 'db' && r.nodeId !== victim.id && r.startNs > at);
      }, 90_000);
      const died = runsOf(log.events).find((r) => r.containerId === old?.containerId);
      const endNs = died?.endNs ?? null;
      return {
        killedMs: endNs === null ? Number.NaN : Number((endNs - at) / nsPerMs),
        backMs: Number((fresh.startNs - at) / nsPerMs),
        overlapped: endNs === null || endNs > fresh.startNs,
      };
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  } finally {
    await sys.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, write: { type: 'boolean', default: false } } });
  const rounds: Round[] = [];
  for (let i = 0; i < Number(values.rounds); i++) {
    const r = await round();
    console.log(`round ${i + 1}: old container killed after ${r.killedMs} ms, new one started after ${r.backMs} ms${r.overlapped ? ' (OVERLAP)' : ''}`);
    rounds.push(r);
  }
  const row = (r: Round, i: number): string => `| ${i + 1} | ${r.killedMs} | ${r.backMs} | ${r.overlapped ? 'yes' : 'no'} |`;
  const text = [
    '## Exclusive services: recovery after the node freezes (SIGSTOP of its shoal)',
    '',
    `\`npx tsx bench/exclusive.ts --rounds ${values.rounds}\`, ${new Date().toISOString().slice(0, 10)}: three processes on one Docker daemon, down after 3 s, `
      + `lease ${leaseDefaults.leaseMs} ms + margin ${leaseMarginMs(leaseDefaults)} ms (the leader waits ${replaceAfterMs(leaseDefaults)} ms after the last renewal it applied). `
      + 'Times from Docker\'s event stamps, from the SIGSTOP. Target: back within 30 s, never two at once.',
    '',
    '| round | old container killed (ms) | new container started (ms) | overlap |',
    '|---|---|---|---|',
    ...rounds.map(row),
  ].join('\n');
  console.log(text);
  if (values.write) writeNamedSection('exclusive', text);
}

await main();
