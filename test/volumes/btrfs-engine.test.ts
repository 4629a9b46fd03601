// The volume engine on real btrfs (issue 41): three engines in three data directories stand for
// three nodes. A writer makes its volume, writes, snapshots and sends a full copy, then a small
// change as an increment (only about the change crosses); a holder refuses a stale writer, a
// damaged stream and an increment on a version it lacks, keeping nothing of them; a holder
// restores the newest version and, as the new writer, sends an increment on the copy it
// received to the third node; the old writer's live volume is set aside as diverged.
// Needs root, loop devices and btrfs-progs, as the node agent does (npm run test:setup).

import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile, appendFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShoalError } from '../../src/errors.ts';
import { VolumeEngine, type IncrementOffer } from '../../src/executor/volumes/volume-engine.ts';
import { refuseIncrement, type VolumeRecord, type VolumeVersion } from '../../src/resources/volumes.ts';

const size = 160 * 1024 * 1024;
const vol = 'pgdata';
const v = (seq: number, node: string, epoch: number): VolumeVersion => ({ seq, node, epoch });

let base: string;
const engines: Record<'a' | 'b' | 'c', VolumeEngine> = {} as never;

async function copy(from: VolumeEngine, to: VolumeEngine, version: VolumeVersion, parent: VolumeVersion | null, sender = { node: version.node, epoch: version.epoch }, refuse: () => string | null = () => null) {
  const inc = await from.makeIncrement(vol, version, parent, sender);
  try {
    await to.receive(inc, size, from.body(inc), refuse);
  } finally {
    await from.release(inc);
  }
  return inc;
}

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(ShoalError);
  expect((err as ShoalError).code).toBe('volume_copy_refused');
  return String((err as ShoalError).details?.reason);
}

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'shoal-volumes-'));
  for (const n of ['a', 'b', 'c'] as const) engines[n] = new VolumeEngine(join(base, n));
});

afterAll(async () => {
  for (const e of Object.values(engines)) await e.unmount(vol).catch(() => undefined);
  await rm(base, { recursive: true, force: true });
});

describe('the volume engine on btrfs', () => {
  const big = randomBytes(8 * 1024 * 1024);

  it('makes the volume, snapshots it and sends it whole to a holder', async () => {
    const { a, b } = engines;
    expect(await a.prepareLive(vol, size, null)).toEqual({ restored: false, setAside: null });
    await writeFile(join(a.livePath(vol), 'big.bin'), big);
    await writeFile(join(a.livePath(vol), 'counter'), '1\n');
    await a.snapshot(vol, v(1, 'a', 1));
    const inc = await copy(a, b, v(1, 'a', 1), null);
    expect(inc.bytes).toBeGreaterThan(big.length);
    expect(await b.versions(vol)).toEqual([v(1, 'a', 1)]);
  });

  it('sends a small change as an increment of about its size, not the volume', async () => {
    const { a, b } = engines;
    await appendFile(join(a.livePath(vol), 'counter'), `${'2'.repeat(4095)}\n`);
    await a.snapshot(vol, v(2, 'a', 1));
    const inc = await copy(a, b, v(2, 'a', 1), v(1, 'a', 1));
    expect(inc.bytes).toBeGreaterThan(4096);
    expect(inc.bytes).toBeLessThan(64 * 1024);
    expect(await b.versions(vol)).toEqual([v(1, 'a', 1), v(2, 'a', 1)]);
  });

  it('refuses a writer whose epoch is not current, by the store\'s rule, and keeps nothing of it', async () => {
    const { a, b } = engines;
    await a.snapshot(vol, v(3, 'a', 1));
    // The store says b is the writer now (a was declared down): a's late increment is refused.
    const rec: VolumeRecord = {
      name: vol, service: 'db', copies: 2, everyMs: 30_000, sizeBytes: size, lastError: null,
      eras: [{ node: 'a', epoch: 1, fromSeq: 1, base: null }, { node: 'b', epoch: 4, fromSeq: 3, base: v(2, 'a', 1) }],
      held: [{ node: 'b', version: v(2, 'a', 1), atMs: 0 }],
    };
    const reason = await refusal(copy(a, b, v(3, 'a', 1), v(2, 'a', 1), { node: 'a', epoch: 1 }, () => refuseIncrement(rec, { node: 'a', epoch: 1 }, v(3, 'a', 1))));
    expect(reason).toBe('stale_epoch');
    expect(await b.versions(vol)).toEqual([v(1, 'a', 1), v(2, 'a', 1)]);
  });

  it('refuses a damaged stream, an increment on a version it lacks, and a version it has', async () => {
    const { a, b } = engines;
    const inc = await a.makeIncrement(vol, v(3, 'a', 1), v(2, 'a', 1), { node: 'a', epoch: 1 });
    try {
      const damaged: IncrementOffer = { ...inc, sha256: '0'.repeat(64) };
      expect(await refusal(b.receive(damaged, size, a.body(inc), () => null))).toBe('checksum');
      const longer = Buffer.concat([await readFile(inc.file), Buffer.from('x')]);
      expect(await refusal(b.receive(inc, size, Readable.from([longer]), () => null))).toBe('checksum');
      expect(await refusal(b.receive({ ...inc, parent: v(9, 'a', 1) }, size, a.body(inc), () => null))).toBe('no_parent');
      expect(await refusal(b.receive({ ...inc, version: v(2, 'a', 1) }, size, a.body(inc), () => null))).toBe('exists');
      expect(await refusal(b.receive({ ...inc, bytes: 2 * size + 1 }, size, a.body(inc), () => null))).toBe('too_large');
    } finally {
      await a.release(inc);
    }
    expect(await b.versions(vol)).toEqual([v(1, 'a', 1), v(2, 'a', 1)]);
  });

  it('restores the newest copy on a holder, which as the new writer sends an increment on it to a third node', async () => {
    const { a, b, c } = engines;
    await copy(a, c, v(1, 'a', 1), null);
    await copy(a, c, v(2, 'a', 1), v(1, 'a', 1));
    expect(await b.prepareLive(vol, size, v(2, 'a', 1))).toEqual({ restored: true, setAside: null });
    const counter = await readFile(join(b.livePath(vol), 'counter'), 'utf8');
    expect(counter).toBe(`1\n${'2'.repeat(4095)}\n`);
    expect((await readFile(join(b.livePath(vol), 'big.bin'))).equals(big)).toBe(true);
    await appendFile(join(b.livePath(vol), 'counter'), '3\n');
    await b.snapshot(vol, v(3, 'b', 4));
    const inc = await copy(b, c, v(3, 'b', 4), v(2, 'a', 1));
    expect(inc.bytes).toBeLessThan(64 * 1024);
    expect(await c.versions(vol)).toEqual([v(1, 'a', 1), v(2, 'a', 1), v(3, 'b', 4)]);
    expect(await c.prepareLive(vol, size, v(3, 'b', 4))).toEqual({ restored: true, setAside: null });
    expect(await readFile(join(c.livePath(vol), 'counter'), 'utf8')).toBe(`${counter}3\n`);
  });

  it('sets the old writer\'s live volume aside as diverged, kept', async () => {
    const { a } = engines;
    expect(await a.setAsideLive(vol)).toBe('live-1');
    expect(await a.diverged(vol)).toEqual(['live-1']);
    // Its versions stay too (the store calls those past the restored one diverged; nothing deletes them).
    expect(await a.versions(vol)).toEqual([v(1, 'a', 1), v(2, 'a', 1), v(3, 'a', 1)]);
    expect(await a.prepareLive(vol, size, null)).toEqual({ restored: false, setAside: null });
    await expect(a.prepareLive(vol, size, v(7, 'b', 4))).rejects.toMatchObject({ code: 'volume_no_copy' });
  });
});
