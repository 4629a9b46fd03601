// A replicated volume following its exclusive service on a real three-process cluster running
// real containers on the machine's Docker daemon (issue 41, docs/volumes.md), two failovers on one
// cluster:
//
// 1. kill -9: the container appends a sequence number to a file in its replicated volume every
//    100 ms (every: 1s); the node running it dies (kill -9 of its shoal process and of its
//    container, as a machine death would); the replacement on another node starts from a copy of
//    the volume whose last number is close to the last one written (within a bound of intervals),
//    never from an empty volume; the dead node, back, keeps its own live volume set aside as
//    diverged, and the task stays where it is.
// 2. partition, with a real database engine: the container inserts a row every 100 ms into a
//    SQLite database (WAL) in its replicated volume, each row naming the container that wrote it;
//    the node running it is cut off from the others (partition.ts: its peer links and its calls
//    to their APIs, so no increment leaves it either); its agent kills the task at lease expiry,
//    and Docker's own event times show the old container died before the new one started
//    elsewhere; the database opens cleanly there, `PRAGMA integrity_check` answers ok, its rows
//    are 1..n with no hole, the old writer's first then the new one's (never interleaved), and
//    the old writer's part is a prefix of what it inserted, within the bound of what it had at
//    the cut; healed, the node sets its live volume aside as diverged, whole, and the task stays.
//
// Needs root, btrfs-progs, sqlite3, iptables and Docker. Run under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/replicated-volume.test.ts

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VolumeView } from '../../src/api/volume-routes.ts';
import type { ClusterNode } from '../cluster/process-cluster.ts';
import { ensureSqliteTestImage, sqliteTestImage } from '../executor/test-image.ts';
import { runsOf, slotOverlaps } from './container-events.ts';
import { DockerSystem, serviceDoc } from './docker-system.ts';
import { cutOff } from './partition.ts';

const fastHealth = { suspectAfterMs: 1_000, downAfterMs: 3_000, restartGraceMs: 3_000 };
const volume = 'counterdata';
/** Numbers written per interval (100 ms apart, every: 1s). */
const perInterval = 10;
/**
 * The bound on what a failover may lose, in intervals: the target is one interval plus
 * the send time; a pass may also have started just before the kill, and the loop looks once a
 * second. Generous, as it is not a measure of speed (bench/ has the figure).
 */
const lossIntervalsMax = 8;

// Continues from the last number in the file, saying where it started: `start N`.
const counterScript = [
  'f=/data/seq',
  'i=$(grep -v start $f 2>/dev/null | tail -n 1)',
  'i=${i:-0}',
  'echo "start $i" >> $f',
  'while true; do i=$((i+1)); echo $i >> $f; sleep 0.1; done',
].join('; ');

const counterDoc = serviceDoc('counter', {
  exclusive: true, replicas: 1, command: ['sh', '-c', counterScript],
  mounts: [{ type: 'volume', source: volume, target: '/data', replicate: { copies: 2, every: '1s', size: '160Mi' } }],
});

function liveFile(node: ClusterNode, vol = volume, file = 'seq'): string {
  return path.join(node.dir, 'volumes', vol, 'mnt', 'live', file);
}

/** The numbers in a counter file, and the `start N` lines. */
function readCounter(file: string): { numbers: number[]; starts: number[] } {
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
  return {
    numbers: lines.filter((l) => !l.startsWith('start')).map(Number),
    starts: lines.filter((l) => l.startsWith('start ')).map((l) => Number(l.slice(6))),
  };
}

/** Unmounts every replicated volume's filesystem under the nodes' data directories (after their containers are gone). */
function unmountVolumes(sys: DockerSystem): void {
  for (const n of sys.cluster.nodes) {
    const root = path.join(n.dir, 'volumes');
    if (!existsSync(root)) continue;
    for (const v of readdirSync(root)) spawnSync('umount', [path.join(root, v, 'mnt')]);
  }
}

async function volumeView(sys: DockerSystem, vol = volume): Promise<VolumeView> {
  const r = await sys.api<VolumeView>('GET', `/v1/volumes/${vol}`);
  if (r.status !== 200) throw new Error(`GET /v1/volumes/${vol} answered ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body;
}

/** The first entry under the node's `diverged/` (a live volume set aside), or undefined. */
function divergedEntry(node: ClusterNode, vol: string): string | undefined {
  const aside = path.join(node.dir, 'volumes', vol, 'mnt', 'diverged');
  const entries = existsSync(aside) ? readdirSync(aside) : [];
  return entries.length > 0 ? path.join(aside, entries[0] as string) : undefined;
}

const dbVolume = 'sqldata';
const dbFile = 'rows.db';
// The workload of the partition: SQLite in WAL mode, a row every 100 ms naming its writer (the
// container's hostname: its id's first 12 characters). A start first opens what it was given
// and notes, in /data/starts, its writer and the engine's integrity check of it (`ok`).
const sqliteScript = [
  `db=/data/${dbFile}`,
  'w=$(hostname)',
  'q() { sqlite3 -cmd ".timeout 5000" $db "$1"; }',
  'c=$(q "PRAGMA integrity_check" 2>&1)',
  'echo "$w" $c >> /data/starts',
  'q "PRAGMA journal_mode=WAL" > /dev/null',
  'q "CREATE TABLE IF NOT EXISTS r(seq INTEGER PRIMARY KEY, writer TEXT NOT NULL)"',
  'i=$(q "SELECT coalesce(max(seq), 0) FROM r")',
  'while true; do n=$((i+1)); if q "INSERT INTO r VALUES($n, \'$w\')"; then i=$n; fi; sleep 0.1; done',
].join('; ');

const sqliteDoc = serviceDoc('db', {
  image: sqliteTestImage, exclusive: true, replicas: 1, command: ['sh', '-c', sqliteScript],
  mounts: [{ type: 'volume', source: dbVolume, target: '/data', replicate: { copies: 2, every: '1s', size: '160Mi' } }],
});

/** One query by the machine's sqlite3 (the same engine the image carries); its output, trimmed. */
function sql(db: string, query: string, opts: { readOnly?: boolean } = {}): string {
  const r = spawnSync('sqlite3', [...(opts.readOnly === true ? ['-readonly'] : []), '-cmd', '.timeout 5000', db, query], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`sqlite3 ${db} '${query}': exit ${r.status}: ${r.stderr}`);
  return r.stdout.trim();
}

/** The rows of the database: [seq, writer], in seq order. */
function rowsOf(db: string, opts: { readOnly?: boolean } = {}): Array<[number, string]> {
  const out = sql(db, "SELECT seq || ' ' || writer FROM r ORDER BY seq", opts);
  return out === '' ? [] : out.split('\n').map((l) => { const [seq, writer] = l.split(' '); return [Number(seq), writer ?? '']; });
}

/** The writers in row order, each once per run of rows (two writers interleaved show up as more than two). */
function writerRuns(rows: ReadonlyArray<[number, string]>): string[] {
  const out: string[] = [];
  for (const [, w] of rows) if (out.at(-1) !== w) out.push(w);
  return out;
}

/** The exclusive service converged on a node other than the leader (leadership handed on if not); returns that node. */
async function placedOffLeader(sys: DockerSystem, service: string): Promise<ClusterNode> {
  for (let attempt = 0; ; attempt++) {
    const s = await sys.waitConverged(service);
    const nodeId = s.tasks.find((t) => t.desired === 'running')?.nodeId;
    const leader = await sys.leader();
    if (nodeId !== leader.id) {
      const node = sys.cluster.nodes.find((n) => n.id === nodeId);
      if (node === undefined) throw new Error(`${service} is on no node`);
      return node;
    }
    if (attempt >= 3) throw new Error(`${service} stays on the leader`);
    const r = await sys.api<unknown>('POST', '/v1/cluster/leader', {});
    expect(r.status).toBe(200);
    await sys.waitFor('a new leader', async () => ((await sys.leader()).id !== leader.id ? true : undefined));
  }
}

describe('a replicated volume follows its exclusive service', () => {
  // One cluster for both failovers; each node on its own loopback address, so one can be cut off.
  const sys = new DockerSystem({ control: fastHealth, ownHosts: true });

  beforeAll(async () => {
    await ensureSqliteTestImage();
    await sys.start();
  }, 120_000);

  afterAll(async () => {
    // Containers first (they bind the volumes), then the filesystems, then the cluster.
    await Promise.all(sys.cluster.nodes.map((n) => sys.cluster.kill(n)));
    for (const c of await sys.containers().catch(() => [])) await sys.docker.getContainer(c.id).remove({ force: true }).catch(() => undefined);
    unmountVolumes(sys);
    await sys.close();
  }, 60_000);

  it('after kill -9 of the node running it, the task starts elsewhere from a recent copy; the dead node\'s copy is kept as diverged', async () => {
    await sys.apply(counterDoc);
    const placed = await sys.waitConverged('counter');
    const victimId = placed.tasks.find((t) => t.desired === 'running')?.nodeId;
    const victim = sys.cluster.nodes.find((n) => n.id === victimId);
    if (victim === undefined) throw new Error('the task is on no node');

    // A few versions copied to both other nodes.
    const before = await sys.waitFor('versions copied to two holders', async () => {
      const v = await volumeView(sys);
      return v.newest !== null && v.newest.nodes.length === 2 && Number(/^s(\d+)/.exec(v.newest.version)?.[1]) >= 3 ? v : undefined;
    }, 60_000);
    expect(before.writer?.node).toBe(victim.id);
    expect(before.newest?.nodes.sort()).toEqual(sys.cluster.nodes.filter((n) => n !== victim).map((n) => n.id).sort());
    expect(before.lastError).toBeNull();

    // More than three intervals written (versions may land faster than that: the loop wakes
    // on the record's changes), so what is lost below is measured against a volume in use.
    await sys.waitFor('three intervals written', async () => ((readCounter(liveFile(victim)).numbers.at(-1) ?? 0) > 3 * perInterval ? true : undefined), 60_000);

    // The machine dies: its container and its shoal, at once.
    const container = (await sys.containers('counter')).find((c) => c.running && c.nodeId === victim.id);
    if (container === undefined) throw new Error('no running container of counter on the victim');
    await Promise.all([sys.docker.getContainer(container.id).kill({ signal: 'SIGKILL' }), sys.cluster.kill(victim)]);
    const written = readCounter(liveFile(victim)).numbers;
    const lastWritten = written.at(-1) ?? 0;
    expect(lastWritten).toBeGreaterThan(3 * perInterval);

    // The replacement, on another node, continues from the copy it restored.
    const replacement = await sys.waitFor('counter running on another node', async () => {
      const s = await sys.service('counter');
      const t = s.tasks.find((x) => x.desired === 'running' && x.nodeId !== victim.id && x.observed === 'running');
      return t === undefined ? undefined : sys.cluster.nodes.find((n) => n.id === t.nodeId);
    }, 90_000);
    const resumed = await sys.waitFor('the replacement writing', async () => {
      const c = existsSync(liveFile(replacement)) ? readCounter(liveFile(replacement)) : undefined;
      // Three numbers past its start: the checks below read them.
      return c !== undefined && c.starts.length >= 2 && (c.numbers.at(-1) ?? 0) >= (c.starts.at(-1) ?? 0) + 3 ? c : undefined;
    });
    const from = resumed.starts.at(-1) ?? 0;
    // Never an empty volume; never past what was written; at most a bound of intervals lost.
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(lastWritten);
    expect(lastWritten - from).toBeLessThanOrEqual(lossIntervalsMax * perInterval);
    console.log(`replicated volume: the replacement started from ${from}, the last number written was ${lastWritten}: ${lastWritten - from} lost (${((lastWritten - from) / perInterval).toFixed(1)} intervals of 1 s)`);
    // The copy is the volume as it was: 1..from in order, then the replacement's own numbers.
    const upTo = resumed.numbers.slice(0, from);
    expect(upTo).toEqual(Array.from({ length: from }, (_, i) => i + 1));
    expect(resumed.numbers.slice(from, from + 3)).toEqual([from + 1, from + 2, from + 3]);
    const after = await volumeView(sys);
    expect(after.writer?.node).toBe(replacement.id);

    // The dead node comes back: its live volume (what it wrote after the newest copy) is set
    // aside as diverged, kept whole; the task stays where it runs.
    sys.cluster.start(victim);
    const kept = await sys.waitFor('the returning node\'s live volume set aside as diverged', async () => divergedEntry(victim, volume), 60_000);
    expect(readCounter(path.join(kept, 'seq')).numbers).toEqual(written);
    const s = await sys.service('counter');
    expect(s.tasks.filter((t) => t.desired === 'running').map((t) => t.nodeId)).toEqual([replacement.id]);
    expect((await volumeView(sys)).writer?.node).toBe(replacement.id);
  }, 240_000);

  it('cut off from the others, the node\'s task is killed by the lease before it starts elsewhere; the SQLite database there opens cleanly, whole, a prefix of what was inserted', async () => {
    // The first failover's service stopped: its loop and its container would only add load.
    const scaled = await sys.api<unknown>('POST', '/v1/services/counter/scale', { replicas: 0 });
    expect(scaled.status).toBe(200);
    await sys.apply(sqliteDoc);
    const victim = await placedOffLeader(sys, 'db');
    const victimDb = liveFile(victim, dbVolume, dbFile);
    await sys.waitFor('versions of the database copied to two holders', async () => {
      const v = await volumeView(sys, dbVolume);
      return v.newest !== null && v.newest.nodes.length === 2 && Number(/^s(\d+)/.exec(v.newest.version)?.[1]) >= 3 ? v : undefined;
    }, 60_000);
    const log = sys.events;
    if (log === undefined) throw new Error('no event log');
    await log.catchUp(sys.cluster.clusterId);
    const old = runsOf(log.events).find((r) => r.service === 'db' && r.endNs === null && r.nodeId === victim.id);
    if (old === undefined) throw new Error('no running container of db on the victim in the event log');
    const oldWriter = old.containerId.slice(0, 12);

    const cutNs = BigInt(Date.now()) * 1_000_000n;
    const heal = cutOff(sys.cluster.nodes, victim);
    // What the old writer had inserted once the cut was in place: nothing after it can reach the others.
    let atCut: number;
    let oldRows: Array<[number, string]>;
    let replacement: ClusterNode;
    let newWriter: string;
    try {
      // Not a count of intervals: each row is a process start, slower than 100 ms on a loaded machine.
      atCut = Number(sql(victimDb, 'SELECT max(seq) FROM r'));
      expect(atCut).toBeGreaterThan(0);
      const fresh = await sys.waitFor('db started on another node', async () => {
        await log.catchUp(sys.cluster.clusterId);
        return runsOf(log.events).find((r) => r.service === 'db' && r.nodeId !== victim.id && r.startNs > cutNs);
      }, 90_000);
      await log.catchUp(sys.cluster.clusterId);
      log.assertWhole();
      // Never two writers: the old container died (its agent, at lease expiry) before the new one started.
      const runs = runsOf(log.events);
      const oldEnd = runs.find((r) => r.containerId === old.containerId)?.endNs ?? null;
      expect(oldEnd, 'the old container died').not.toBeNull();
      expect((oldEnd ?? 0n) < fresh.startNs, 'the old container died before the new one started').toBe(true);
      expect(slotOverlaps(runs, 'db')).toEqual([]);
      const found = sys.cluster.nodes.find((n) => n.id === fresh.nodeId);
      if (found === undefined) throw new Error(`db started on an unknown node ${fresh.nodeId}`);
      replacement = found;
      newWriter = fresh.containerId.slice(0, 12);
      // Everything the old writer inserted, read on its node (its container is dead; the node still cut off).
      oldRows = rowsOf(victimDb, { readOnly: true });
    } finally {
      heal();
    }
    expect(oldRows.map(([seq]) => seq)).toEqual(Array.from({ length: oldRows.length }, (_, i) => i + 1));
    expect(writerRuns(oldRows)).toEqual([oldWriter]);
    expect(oldRows.length).toBeGreaterThanOrEqual(atCut);

    // The replacement opened the copy it restored: the engine's integrity check said ok, and it writes on.
    const newDb = liveFile(replacement, dbVolume, dbFile);
    const startsFile = liveFile(replacement, dbVolume, 'starts');
    const rows = await sys.waitFor('the replacement inserting', async () => {
      if (!existsSync(startsFile) || !readFileSync(startsFile, 'utf8').includes(newWriter)) return undefined;
      const r = rowsOf(newDb);
      return r.filter(([, w]) => w === newWriter).length >= 3 ? r : undefined;
    });
    const starts = readFileSync(startsFile, 'utf8').split('\n').filter((l) => l !== '');
    expect(starts).toEqual([`${oldWriter} ok`, `${newWriter} ok`]);
    expect(sql(newDb, 'PRAGMA integrity_check')).toBe('ok');
    // 1..n with no hole; the old writer's rows, then the new one's, never interleaved.
    expect(rows.map(([seq]) => seq)).toEqual(Array.from({ length: rows.length }, (_, i) => i + 1));
    expect(writerRuns(rows)).toEqual([oldWriter, newWriter]);
    const from = rows.filter(([, w]) => w === oldWriter).length;
    // The old writer's part is a prefix of what it inserted, holds what it had at the cut but for
    // a bound of intervals, and nothing it wrote once cut off.
    expect(rows.slice(0, from)).toEqual(oldRows.slice(0, from));
    expect(from).toBeLessThanOrEqual(atCut);
    expect(atCut - from).toBeLessThanOrEqual(lossIntervalsMax * perInterval);
    console.log(`replicated volume, partition: the replacement's database held rows 1..${from}; the old writer had ${atCut} at the cut and ${oldRows.length} when its task was killed`);

    // Healed, the node sets its live volume aside as diverged, whole; the task stays where it runs.
    const kept = await sys.waitFor('the healed node\'s live volume set aside as diverged', async () => divergedEntry(victim, dbVolume), 60_000);
    expect(rowsOf(path.join(kept, dbFile), { readOnly: true })).toEqual(oldRows);
    await sys.waitFor(`${victim.name} ready again`, async () => ((await sys.nodeView(victim.name)).record.state === 'ready' ? true : undefined), 60_000);
    const s = await sys.service('db');
    expect(s.tasks.filter((t) => t.desired === 'running').map((t) => t.nodeId)).toEqual([replacement.id]);
    expect((await volumeView(sys, dbVolume)).writer?.node).toBe(replacement.id);
    await log.catchUp(sys.cluster.clusterId);
    expect(slotOverlaps(runsOf(log.events), 'db')).toEqual([]);
  }, 240_000);
});
