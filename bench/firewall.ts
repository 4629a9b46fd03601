// Time from a firewall policy change committed to the rule in force on a node: the per-node
// part of issue 24's "time from a policy change committed to the rule in force on every node"
// (every node runs the same loop in parallel, from its own applied store; the Raft commit
// before it is measured by bench/compare.ts).
//
//   sudo npx tsx bench/firewall.ts [--rounds 30] [--write]
//
// A network namespace stands for the node (nothing on the host changes). A real document store
// holds two networks with W web and W db tasks on this node, each with its address; the firewall
// loop (net/firewall-loop.ts) runs with the real nft and conntrack through `ip netns exec`. Each
// round writes a changed policy (web may open db's port 5432, then 5433, ...) into the store, as
// an applied entry, and times until the loop has applied the table of that revision (nft -f
// returned, the old permits' conntrack entries deleted). W = 10 gives 100 permitted tuples, W =
// 100 gives 10,000. --write replaces the "firewall" section of bench/RESULTS.md.

import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { DocumentStore, encodeCommand } from '../fsm/index.ts';
import type { JsonObject } from '../fsm/types.ts';
import { tasksCollection } from '../src/resources/collections.ts';
import { firewallPoliciesCollection, networksCollection } from '../src/resources/network-resources.ts';
import { commandRunner } from '../net/firewall-command.ts';
import { Firewall } from '../net/firewall.ts';
import { FirewallLoop } from '../net/firewall-loop.ts';
import { writeNamedSection } from './lib/report.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '30' }, write: { type: 'boolean', default: false } } });
const rounds = Number(values.rounds);
const ns = `shoalfw-bench-${process.pid}`;

let index = 0;
function put(store: DocumentStore, collection: string, id: string, doc: object): void {
  index += 1;
  store.apply({ index, term: 2, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: index }) });
}

function task(id: string, service: string): object {
  return {
    id, service, slot: 1, specVersion: 1, nodeId: 'n1', desired: 'running', observed: 'running', assignedTerm: 2, nodeEpoch: 0, containerId: null,
    exitCode: null, message: null, pendingReason: null, attempt: 0, createdAt: 0, assignedAt: 0, startedAt: 0, finishedAt: null, updatedAt: 0,
  };
}

function network(name: string, subnet: string, addresses: Record<string, string>): object {
  return { name, spec: { name, subnet, internal: false, slicePrefix: 24 }, slices: { n1: 0 }, addresses, createdAt: 0, updatedAt: 0 };
}

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
};

async function measure(width: number): Promise<number[]> {
  const store = new DocumentStore();
  const web: Record<string, string> = {};
  const db: Record<string, string> = {};
  for (let i = 0; i < width; i++) {
    put(store, tasksCollection, `web-${i}`, task(`web-${i}`, 'web'));
    put(store, tasksCollection, `db-${i}`, task(`db-${i}`, 'db'));
    web[`web-${i}`] = `10.61.${i >> 8}.${(i & 255) + 2}`;
    db[`db-${i}`] = `10.62.${i >> 8}.${(i & 255) + 2}`;
  }
  put(store, networksCollection, 'front', network('front', '10.61.0.0/16', web));
  put(store, networksCollection, 'back', network('back', '10.62.0.0/16', db));
  let onApplied: (revision: number) => void = () => undefined;
  const loop = new FirewallLoop({
    store, nodeId: 'n1', term: () => 2, managementPorts: [7101, 7001],
    firewall: new Firewall(commandRunner({ prefix: ['ip', 'netns', 'exec', ns] })),
    log: { info: (m) => { const r = /revision (\d+)/.exec(m); if (r !== null) onApplied(Number(r[1])); }, warn: (m) => console.error(m) },
  });
  const applied = (revision: number): Promise<void> => new Promise((resolve) => {
    onApplied = (r) => { if (r >= revision) resolve(); };
  });
  const first = applied(store.revision);
  loop.start();
  await first;
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const spec = { name: 'web-db', allow: [{ from: { services: ['web'], networks: [] }, to: { services: ['db'], networks: [] }, ports: [{ port: 5432 + (i % 2), protocol: 'tcp' }] }], publish: [] };
    const done = applied(index + 1);
    const t0 = performance.now();
    put(store, firewallPoliciesCollection, 'web-db', { name: 'web-db', spec, createdAt: 0, updatedAt: 0 });
    await done;
    samples.push(performance.now() - t0);
  }
  await loop.close();
  return samples;
}

spawnSync('ip', ['netns', 'add', ns]);
try {
  const rows: string[] = [];
  for (const width of [10, 100]) {
    const ms = await measure(width);
    rows.push(`| ${width} × ${width} | ${width * width} | ${quantile(ms, 0.5).toFixed(1)} | ${quantile(ms, 0.9).toFixed(1)} | ${Math.max(...ms).toFixed(1)} |`);
    console.log(rows.at(-1));
  }
  const text = [
    '## Firewall: a policy change committed to the rule in force (one node)',
    '',
    `\`sudo npx tsx bench/firewall.ts --rounds ${rounds} --write\`, ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), nft ${spawnSync('nft', ['--version'], { encoding: 'utf8' }).stdout.trim().split(' ')[1] ?? '?'}.`,
    'From the policy entry applied in the node\'s store to `nft -f` of the new table returned and the revoked permits\' conntrack entries deleted',
    '(includes the 50 ms coalescing window of the loop, reading the table in force back as JSON, and rendering). Every node does this in parallel once the entry commits.',
    '',
    '| web × db tasks on the node | permitted tuples | median ms | p90 ms | max ms |',
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n');
  if (values.write) writeNamedSection('firewall', text);
} finally {
  spawnSync('ip', ['netns', 'del', ns]);
}
