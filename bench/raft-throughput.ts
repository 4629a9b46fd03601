// Throughput of the consensus core alone: an in-process three-node cluster on in-memory storage
// and an in-memory network, 256-byte entries, N closed-loop proposers (each waits for its entry
// to be applied on the leader before proposing the next). Counts committed entries per second.
//
//   npm run bench:raft -- [--seconds S] [--proposers 1,64] [--write]
//
// (npm run bench is the side-by-side comparison with etcd, bench/compare.ts.)
//
// --write replaces the "raft core" section of bench/RESULTS.md with the figures.

import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { RawNode } from '../src/raft/raw-node.ts';
import { bootstrapStorage, MemoryStorage } from '../src/raft/storage.ts';
import { SeededPrng } from '../src/raft/prng.ts';
import type { Message, NodeId } from '../src/raft/types.ts';

const entryBytes = 256;

interface Member {
  node: RawNode;
  storage: MemoryStorage;
}

interface Result {
  proposers: number;
  entries: number;
  seconds: number;
  perSecond: number;
  heapMiB: number;
}

function makeCluster(): Map<NodeId, Member> {
  const ids = ['n1', 'n2', 'n3'];
  const members = new Map<NodeId, Member>();
  for (const [i, id] of ids.entries()) {
    const storage = new MemoryStorage();
    bootstrapStorage(storage, ids);
    const node = new RawNode({ id, prng: new SeededPrng(i + 1), appendsInflightMax: 256 }, storage);
    members.set(id, { node, storage });
  }
  return members;
}

/** Runs one Ready cycle on every node and delivers the messages. Returns entries applied on `watch`. */
function pump(members: Map<NodeId, Member>, watch: NodeId): number {
  let applied = 0;
  const outbox: Message[] = [];
  for (const [id, m] of members) {
    if (!m.node.hasReady()) continue;
    const rd = m.node.ready();
    if (rd.snapshot) m.storage.applySnapshot(rd.snapshot);
    m.storage.append(rd.entries);
    if (rd.hardState) m.storage.setHardState(rd.hardState);
    for (const msg of rd.messages) outbox.push(msg);
    if (id === watch) for (const e of rd.committedEntries) if (e.kind === 'normal' && e.data.length > 0) applied++;
    m.node.advance(rd);
    // Keep the in-memory log bounded, as a real node compacts after snapshots.
    const st = m.node.status();
    if (st.applied - m.storage.firstIndex() > 20_000) {
      m.storage.createSnapshot(st.applied - 10_000, m.node.confState(), new Uint8Array(0));
      m.storage.compact(st.applied - 10_000);
    }
  }
  for (const msg of outbox) members.get(msg.to)?.node.step(msg);
  return applied;
}

function elect(members: Map<NodeId, Member>): NodeId {
  const first = members.get('n1');
  if (!first) throw new Error('no n1');
  first.node.campaign();
  for (let i = 0; i < 50; i++) pump(members, 'n1');
  if (first.node.status().role !== 'leader') throw new Error('n1 did not become leader');
  return 'n1';
}

function run(proposers: number, seconds: number): Result {
  const members = makeCluster();
  const leaderId = elect(members);
  const leader = members.get(leaderId) as Member;
  const payload = new Uint8Array(entryBytes).fill(7);
  // Closed loop: `waiting` proposers have an entry in flight; each applied entry frees one.
  let idle = proposers;
  let entries = 0;
  let ticks = 0;
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  while (true) {
    for (; idle > 0; idle--) leader.node.propose(payload);
    const applied = pump(members, leaderId);
    entries += applied;
    idle += applied;
    // A tick per few hundred cycles keeps heartbeats flowing without dominating the loop.
    if (++ticks % 256 === 0) {
      for (const m of members.values()) m.node.tick();
      if (process.hrtime.bigint() > deadline) break;
    }
  }
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  return { proposers, entries, seconds: elapsed, perSecond: entries / elapsed, heapMiB: process.memoryUsage().heapUsed / 2 ** 20 };
}

function table(results: Result[]): string {
  const rows = results.map((r) =>
    `| ${r.proposers} | ${Math.round(r.perSecond).toLocaleString('en-US')} | ${r.entries.toLocaleString('en-US')} | ${r.seconds.toFixed(1)} | ${r.heapMiB.toFixed(0)} |`);
  return ['| proposers | entries/s | entries | seconds | heap MiB |', '|---:|---:|---:|---:|---:|', ...rows].join('\n');
}

function machine(): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  return `${os.cpus().length} × ${cpu}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, ${os.platform()} ${os.release()}`;
}

function writeResults(section: string): void {
  const path = new URL('./RESULTS.md', import.meta.url);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    text = '# Benchmark results\n';
  }
  const begin = '<!-- raft-core:begin -->';
  const end = '<!-- raft-core:end -->';
  const block = `${begin}\n${section}\n${end}`;
  const re = new RegExp(`${begin}[\\s\\S]*?${end}`);
  text = re.test(text) ? text.replace(re, block) : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(path, text);
}

function main(): void {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '5' },
      proposers: { type: 'string', default: '1,64' },
      write: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log('usage: npm run bench:raft -- [--seconds S] [--proposers 1,64] [--write]\n' +
      'Committed entries per second of an in-process 3-node cluster, 256-byte entries.');
    return;
  }
  const seconds = Number(values.seconds);
  const counts = values.proposers.split(',').map(Number);
  const results = counts.map((n) => {
    const r = run(n, seconds);
    console.log(`proposers=${n}: ${Math.round(r.perSecond)} entries/s (${r.entries} in ${r.seconds.toFixed(1)} s)`);
    return r;
  });
  const section = [
    '## Raft core: committed entries per second (in-process, in-memory)',
    '',
    `Command: \`npm run bench:raft -- --seconds ${seconds} --proposers ${counts.join(',')} --write\``,
    `Machine: ${machine()}`,
    `Date: ${new Date().toISOString().slice(0, 10)}`,
    '',
    'Three RawNodes in one process, MemoryStorage, messages delivered in memory, 256-byte entries,',
    'closed-loop proposers on the leader (each waits until its entry is applied on the leader).',
    '',
    table(results),
    '',
    'Target: at least 100,000 entries/s with 64 proposers.',
    '',
    'No etcd ratio here: the comparable etcd figure would be its Go raft package benchmarked in',
    'process, and this machine has no Go toolchain. The side-by-side comparison of whole clusters',
    'is the section above (`npm run bench`).',
  ].join('\n');
  if (values.write) writeResults(section);
  console.log(`\n${section}`);
}

main();
