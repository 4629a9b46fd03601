// The routing mesh against the overlay path it rides on (issue 38's target: through the mesh to a
// task on another node, at least 80 % of the overlay path's throughput and at most 0.2 ms more
// latency at p50).
//
//   sudo npm run bench:ingress -- [--mb 200] [--conns 50] [--write]
//
// The overlay lab (test/net/overlay-lab.ts: three shoal nodes in namespaces, each with the
// WireGuard mesh and its own dockerd), the firewall off. A service `sink` with one task on n3
// publishes 9600 (a byte sink) and 9601 (an answer per connection) in ingress mode; a service
// `src` with one task on n1 joins the `ingress` network. From src's container on n1:
//   - overlay: straight to sink's address on `ingress` (VXLAN in WireGuard);
//   - mesh: to n1's own LAN address, the published port: DNAT on n1 (hairpin), SNAT, the same
//     overlay to n3.
// Throughput: `head -c <mb> MB /dev/zero | nc`, the best of three, timed inside the container
// (/proc/uptime) to the sender's exit. Latency: one `docker exec` running <conns> connections in a row
// (`echo | nc`), the median per connection of three such runs; both paths pay the same process
// starts, so their difference is what the mesh adds. --write replaces the "ingress" section of
// bench/RESULTS.md.

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { call, sleep } from '../test/faults/http.ts';
import type { LabNode } from '../test/net/mesh-lab.ts';
import { OverlayLab } from '../test/net/overlay-lab.ts';
import { writeNamedSection } from './lib/report.ts';

const { values } = parseArgs({ options: { mb: { type: 'string', default: '200' }, conns: { type: 'string', default: '50' }, write: { type: 'boolean', default: false } } });
const mb = Number(values.mb);
const conns = Number(values.conns);
const bytes = mb * 1_000_000;
const runs = 3;
const image = 'shoal-test/busybox:local';

function documents(): object[] {
  return [
    {
      apiVersion: 'shoal/v1', kind: 'Service', name: 'sink', image, replicas: 1, constraints: ['node.name == n3'],
      command: ['sh', '-c', 'while true; do echo y | nc -l -p 9601; done & while true; do nc -l -p 9600 > /dev/null; done'],
      ports: [{ published: 9600, target: 9600, mode: 'ingress' }, { published: 9601, target: 9601, mode: 'ingress' }],
    },
    { apiVersion: 'shoal/v1', kind: 'Service', name: 'src', image, replicas: 1, constraints: ['node.name == n1'], networks: ['ingress'], command: ['sleep', '36000'] },
  ];
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

const lab = await OverlayLab.create(mkdtempSync(path.join(os.tmpdir(), 'shoal-bench-ingress-')), { firewall: false });
try {
  const [n1, , n3] = lab.nodes as [LabNode, LabNode, LabNode];
  await Promise.all(lab.nodes.map((n) => lab.mesh.start(n)));
  await lab.mesh.waitFor('the services applied', async () => {
    const r = await call(n1.api, '/v1/apply', { method: 'POST', body: { documents: documents() }, timeoutMs: 10_000 });
    return r.kind === 'answer' && r.status === 200 ? true : undefined;
  }, 120_000);
  const src = await lab.mesh.waitFor('src on n1', () => lab.containers(n1, 'src')[0], 120_000);
  const sink = await lab.mesh.waitFor('sink on n3', () => lab.containers(n3, 'sink')[0], 120_000);
  const exec = (argv: string[]): { status: number | null; stdout: string; stderr: string } => lab.docker(n1, ['exec', src, ...argv], 600_000);
  const targets = [
    { name: 'overlay (container to container: VXLAN in WireGuard)', address: lab.addressOn(n3, sink, 'shoal-ingress') },
    { name: 'routing mesh (to n1\'s published port: DNAT, SNAT, then the same overlay)', address: n1.ip },
  ];
  for (const t of targets) {
    await lab.mesh.waitFor(`an answer through ${t.name}`, () => (exec(['sh', '-c', `echo x | nc -w 2 ${t.address} 9601`]).stdout.includes('y') ? true : undefined), 60_000);
  }
  // Timed inside the container (/proc/uptime, 10 ms steps), so `docker exec`'s own start, which
  // varies by seconds on a loaded machine, is not in the figures.
  const timedIn = (work: string): number => {
    const r = exec(['sh', '-c', `s=$(cut -d' ' -f1 /proc/uptime); ${work}; e=$(cut -d' ' -f1 /proc/uptime); echo "$s $e"`]);
    if (r.status !== 0) throw new Error(`${work} exited with ${r.status}: ${r.stderr.trim()}`);
    const [start, end] = r.stdout.trim().split('\n').at(-1)?.split(' ').map(Number) ?? [];
    if (start === undefined || end === undefined || !Number.isFinite(start) || !Number.isFinite(end)) throw new Error(`no times in ${JSON.stringify(r.stdout)}`);
    return (end - start) * 1000;
  };
  const results: Array<{ name: string; mbps: number; msPerConn: number }> = [];
  for (const t of targets) {
    let best = Infinity;
    for (let i = 0; i < runs; i++) {
      await sleep(300);
      best = Math.min(best, timedIn(`head -c ${bytes} /dev/zero | nc ${t.address} 9600`));
    }
    const per: number[] = [];
    for (let i = 0; i < runs; i++) per.push(timedIn(`i=0; while [ $i -lt ${conns} ]; do echo x | nc -w 2 ${t.address} 9601 > /dev/null; i=$((i+1)); done`) / conns);
    results.push({ name: t.name, mbps: (bytes * 8) / (best / 1000) / 1e6, msPerConn: median(per) });
    console.log(`${t.name}: ${results.at(-1)?.mbps.toFixed(0)} Mbit/s, ${results.at(-1)?.msPerConn.toFixed(3)} ms per connection`);
  }
  const [overlay, mesh] = results as [typeof results[0], typeof results[0]];
  const rows = results.map((r) => `| ${r.name} | ${r.mbps.toFixed(0)} | ${(r.mbps / overlay.mbps).toFixed(2)} | ${r.msPerConn.toFixed(3)} |`);
  const text = [
    '## Routing mesh: through a node\'s published port to a task on another node, beside the overlay path (issue 38)',
    '',
    `\`sudo npm run bench:ingress -- --mb ${mb} --conns ${conns} --write\`, ${new Date().toISOString().slice(0, 16)} UTC, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), shared with other jobs; kernel ${os.release()}.`,
    `Throughput: ${mb} MB through busybox \`nc\` from a container on n1 to the task on n3, the best of ${runs}, timed inside the container (/proc/uptime, 10 ms steps) to the sender's exit.`,
    `Per connection: ${conns} \`echo | nc\` in a row in one \`docker exec\`, the median of ${runs} runs, per connection (process starts included, the same on both paths).`,
    '',
    '| path, n1 to the task on n3 | Mbit/s | × overlay | ms per connection |',
    '|---|---|---|---|',
    ...rows,
    '',
    `Targets: throughput ≥ 0.80 × the overlay's (here ${(mesh.mbps / overlay.mbps).toFixed(2)}); added latency ≤ 0.2 ms (here ${(mesh.msPerConn - overlay.msPerConn).toFixed(3)} ms per connection, a connection being a round trip and a half plus the close).`,
  ].join('\n');
  console.log(text);
  if (values.write) writeNamedSection('ingress', text);
} finally {
  await lab.destroy();
}
