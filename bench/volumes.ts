// Replicated volumes (issue 41) on real btrfs, one machine: a volume filled with DATA MiB of
// random data, sent whole to a holder; then 1 % of its 4 KiB blocks rewritten at random places
// and the increment sent: bytes on the wire (the stream's length) against the change; and the
// time to restore the newest version on the holder (a writable snapshot of a received version).
// Needs root and btrfs-progs. Usage: tsx bench/volumes.ts [--data-mib 1024] [--write]
// (--write records the figures in bench/RESULTS.md, between its volumes markers).
//
// --failover [--rounds 3] [--write]: end to end, on three real shoal processes with the Docker
// runtime (each round a fresh cluster, as test/system/replicated-volume.test.ts runs it): an
// exclusive service appends a counter to a file in its replicated volume every 100 ms (every: 1s);
// kill -9 of the node running it (its shoal and its container); the recovery point (the numbers
// the replacement's copy lacks, against the interval) and the time from the kill to the
// replacement's container started on another node with its data (Docker's event time), the
// median of the rounds. --write replaces the "volumes-failover" section of bench/RESULTS.md.
//
//   flock /tmp/shoal-heavy.lock npx tsx bench/volumes.ts --failover --rounds 3 --write

import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VolumeEngine } from '../src/executor/volumes/volume-engine.ts';
import { failoverMain } from './lib/volume-failover.ts';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(name);
  return i < 0 ? dflt : Number(process.argv[i + 1]);
};
const dataMiB = arg('--data-mib', 1024);
const MiB = 1024 * 1024;
const block = 4096;
const sizeBytes = Math.ceil((dataMiB * 1.5 + 256) / 64) * 64 * MiB;
const vol = 'bench';
const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;

async function main(): Promise<void> {
  const base = await mkdtemp(join(tmpdir(), 'shoal-bench-volumes-'));
  const a = new VolumeEngine(join(base, 'a'));
  const b = new VolumeEngine(join(base, 'b'));
  const self = { node: 'a', epoch: 1 };
  try {
    await a.prepareLive(vol, sizeBytes, null);
    const file = join(a.livePath(vol), 'data.bin');
    const fh = await open(file, 'w');
    for (let i = 0; i < dataMiB; i++) await fh.write(randomBytes(MiB));
    await fh.sync();
    await fh.close();
    await a.snapshot(vol, { seq: 1, ...self });
    let t0 = process.hrtime.bigint();
    const full = await a.makeIncrement(vol, { seq: 1, ...self }, null, self);
    const sendFullMs = ms(t0);
    t0 = process.hrtime.bigint();
    await b.receive(full, sizeBytes, a.body(full), () => null);
    const receiveFullMs = ms(t0);
    await a.release(full);
    // 1 % of the blocks, each rewritten in place at a random block.
    const blocks = (dataMiB * MiB) / block;
    const changed = Math.round(blocks / 100);
    const rw = await open(file, 'r+');
    for (let i = 0; i < changed; i++) await rw.write(randomBytes(block), 0, block, randomInt(blocks) * block);
    await rw.sync();
    await rw.close();
    await a.snapshot(vol, { seq: 2, ...self });
    t0 = process.hrtime.bigint();
    const inc = await a.makeIncrement(vol, { seq: 2, ...self }, { seq: 1, ...self }, self);
    const sendIncMs = ms(t0);
    t0 = process.hrtime.bigint();
    await b.receive(inc, sizeBytes, a.body(inc), () => null);
    const receiveIncMs = ms(t0);
    await a.release(inc);
    t0 = process.hrtime.bigint();
    await b.prepareLive(vol, sizeBytes, { seq: 2, ...self });
    const restoreMs = ms(t0);
    const same = (await readFile(join(b.livePath(vol), 'data.bin'))).equals(await readFile(file));
    const rows = {
      dataMiB, fullStreamBytes: full.bytes, sendFullMs: Math.round(sendFullMs), receiveFullMs: Math.round(receiveFullMs),
      changedBlocks: changed, changedBytes: changed * block, incrementBytes: inc.bytes, incrementOverChange: +(inc.bytes / (changed * block)).toFixed(2),
      incrementOverVolume: +(inc.bytes / full.bytes).toFixed(4), sendIncMs: Math.round(sendIncMs), receiveIncMs: Math.round(receiveIncMs),
      restoreMs: Math.round(restoreMs), restoredEqual: same,
    };
    console.log(JSON.stringify(rows, null, 2));
    if (process.argv.includes('--write')) await record(rows);
  } finally {
    for (const e of [a, b]) await e.unmount(vol).catch(() => undefined);
    await rm(base, { recursive: true, force: true });
  }
}

async function record(r: Record<string, number | boolean>): Promise<void> {
  const path = join(import.meta.dirname, 'RESULTS.md');
  const text = await readFile(path, 'utf8');
  const mib = (n: number): string => `${(n / MiB).toFixed(1)} MiB`;
  const section = `<!-- volumes:begin -->
## Replicated volumes: increments and restore (issue 41)

Command: \`tsx bench/volumes.ts --data-mib ${r.dataMiB} --write\` (root, btrfs-progs). Date: ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC.
One machine, two volume engines (two data directories) on loop-file btrfs filesystems; the stream goes through a file, as the engine sends it.

| what | figure |
|---|---:|
| volume data | ${r.dataMiB} MiB (random) |
| full copy: stream | ${mib(r.fullStreamBytes as number)}; send ${r.sendFullMs} ms, receive ${r.receiveFullMs} ms |
| 1 % of the 4 KiB blocks rewritten | ${r.changedBlocks} blocks, ${mib(r.changedBytes as number)} |
| increment: stream (bytes on the wire) | ${mib(r.incrementBytes as number)}: ${r.incrementOverChange}× the change, ${((r.incrementOverVolume as number) * 100).toFixed(2)} % of the full copy; send ${r.sendIncMs} ms, receive ${r.receiveIncMs} ms |
| restore of the newest version on the holder | ${r.restoreMs} ms (a writable snapshot; data equal: ${r.restoredEqual}) |
<!-- volumes:end -->`;
  const begin = text.indexOf('<!-- volumes:begin -->');
  const end = text.indexOf('<!-- volumes:end -->');
  const out = begin >= 0 && end > begin ? text.slice(0, begin) + section + text.slice(end + '<!-- volumes:end -->'.length) : `${text.trimEnd()}\n\n${section}\n`;
  await writeFile(path, out);
}

await (process.argv.includes('--failover') ? failoverMain() : main());
