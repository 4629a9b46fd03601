// A replicated volume following its exclusive service on a real three-process cluster running
// real containers on the machine's Docker daemon (issue 41, docs/volumes.md): the container
// appends a sequence number to a file in its replicated volume every 100 ms (every: 1s); the
// node running it dies (kill -9 of its shoal process and of its container, as a machine death
// would); the replacement on another node starts from a copy of the volume whose last number is
// close to the last one written (within a bound of intervals), never from an empty volume; the
// dead node, back, keeps its own live volume set aside as diverged, and the task stays where it
// is. Needs root, btrfs-progs and Docker. Run under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/replicated-volume.test.ts

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { VolumeView } from '../../src/api/volume-routes.ts';
import type { ClusterNode } from '../cluster/process-cluster.ts';
import { DockerSystem, serviceDoc } from './docker-system.ts';

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

function liveFile(node: ClusterNode): string {
  return path.join(node.dir, 'volumes', volume, 'mnt', 'live', 'seq');
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

async function volumeView(sys: DockerSystem): Promise<VolumeView> {
  const r = await sys.api<VolumeView>('GET', `/v1/volumes/${volume}`);
  if (r.status !== 200) throw new Error(`GET /v1/volumes/${volume} answered ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body;
}

describe('a replicated volume follows its exclusive service', () => {
  it('after kill -9 of the node running it, the task starts elsewhere from a recent copy; the dead node\'s copy is kept as diverged', async () => {
    const sys = new DockerSystem({ control: fastHealth });
    try {
      await sys.start();
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
      const aside = path.join(victim.dir, 'volumes', volume, 'mnt', 'diverged');
      const kept = await sys.waitFor('the returning node\'s live volume set aside as diverged', async () => {
        const entries = existsSync(aside) ? readdirSync(aside) : [];
        return entries.length > 0 ? path.join(aside, entries[0] as string, 'seq') : undefined;
      }, 60_000);
      expect(readCounter(kept).numbers).toEqual(written);
      const s = await sys.service('counter');
      expect(s.tasks.filter((t) => t.desired === 'running').map((t) => t.nodeId)).toEqual([replacement.id]);
      expect((await volumeView(sys)).writer?.node).toBe(replacement.id);
    } finally {
      // Containers first (they bind the volumes), then the filesystems, then the cluster.
      await Promise.all(sys.cluster.nodes.map((n) => sys.cluster.kill(n)));
      for (const c of await sys.containers().catch(() => [])) await sys.docker.getContainer(c.id).remove({ force: true }).catch(() => undefined);
      unmountVolumes(sys);
      await sys.close();
    }
  }, 240_000);
});
