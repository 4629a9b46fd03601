// Issue 22's scenarios 7 and 8 on a real three-process cluster running real containers on the
// machine's Docker daemon (docker-system.ts): an image that is absent and cannot be pulled (a
// registry address nothing listens on; `shoal apply` of it stops waiting once every task failed
// the same way), and one node's Docker going away and coming back. The
// second goes through a socket proxy in front of n3's Docker socket, which the test closes and
// reopens: stopping the shared daemon would kill every container on the machine. Run under the
// machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/docker-faults.test.ts

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { inProcess } from '../cli/in-process.ts';
import { serviceDoc, withDockerSystem } from './docker-system.ts';

/** Port 1 on the loopback: nothing listens there, so a pull is refused at once (no timeout). */
const unreachableImage = '127.0.0.1:1/shoal-absent:1';

describe('Docker faults on a real cluster', () => {
  it('fails the tasks of an image that cannot be pulled with image_pull_failed; every node stays ready', async () => {
    await withDockerSystem({}, async (sys) => {
      await sys.apply(serviceDoc('ghost', { image: unreachableImage, replicas: 3, restart: { condition: 'never' } }));
      // The wait is well under the agent's pull timeout (300 s): the failure comes from the refused
      // connection, not from giving up.
      const failed = await sys.waitFor('every task of ghost failed', async () => {
        const { tasks } = await sys.service('ghost');
        const mine = tasks.filter((t) => t.desired === 'running' || t.observed === 'failed');
        return mine.length === 3 && mine.every((t) => t.observed === 'failed') ? mine : undefined;
      }, 60_000);
      for (const t of failed) {
        const message = t.report?.message ?? t.record.message ?? '';
        expect(message, `task ${t.id}'s message`).toMatch(/^image_pull_failed: /);
        expect(message).toContain(unreachableImage);
      }
      expect(new Set(failed.map((t) => t.nodeId)).size).toBe(3);
      expect(await sys.containers('ghost')).toEqual([]);
      const nodes = await sys.nodes();
      expect(nodes.map((n) => [n.name, n.record.state, n.record.runtime.status])).toEqual([['n1', 'ready', 'up'], ['n2', 'ready', 'up'], ['n3', 'ready', 'up']]);

      // shoal apply of such an image says why its tasks do not run while it waits, and stops once
      // every task failed the same way twice (2 s apart: the restart delay), long before its timeout.
      const spec = path.join(mkdtempSync(path.join(os.tmpdir(), 'shoal-faults-')), 'ghost2.yaml');
      writeFileSync(spec, stringify(serviceDoc('ghost2', { image: unreachableImage, replicas: 3, restart: { delay: '2s' } })));
      const started = Date.now();
      const applied = await inProcess('apply', '-f', spec, '--timeout', '2m', '--addr', sys.node('n1').apiAddress);
      expect(applied.code, applied.stderr).toBe(1);
      expect(Date.now() - started).toBeLessThan(30_000);
      expect(applied.stderr).toMatch(/\n {4}3 tasks failed: image_pull_failed: .*127\.0\.0\.1:1\/shoal-absent:1/);
      expect(applied.stderr).toContain('ghost2: every task failed 2 times in a row, the same way: image_pull_failed: ');
      rmSync(path.dirname(spec), { recursive: true, force: true });

      // And they still run what they can: a service of the local image converges beside it.
      await sys.apply(serviceDoc('web', { replicas: 3 }));
      await sys.waitConverged('web');
      expect((await sys.containers('web')).filter((c) => c.running)).toHaveLength(3);
    });
  }, 150_000);

  it('a node whose Docker goes away turns runtime unavailable, gets no placements, keeps its container, and recovers by itself', async () => {
    await withDockerSystem({ proxied: 'n3' }, async (sys) => {
      const proxy = sys.proxy;
      if (proxy === undefined) throw new Error('no proxy');
      const n3 = sys.node('n3');
      await sys.apply(serviceDoc('web', { replicas: 3 }));
      await sys.waitConverged('web');
      const kept = (await sys.containers('web')).find((c) => c.nodeId === n3.id);
      if (kept === undefined) throw new Error('no container of web on n3');

      await proxy.close();
      const down = await sys.waitFor('n3 runtime unavailable', async () => {
        const n = await sys.nodeView('n3');
        return n.record.runtime.status === 'unavailable' ? n : undefined;
      });
      expect(down.record.runtime.error).not.toBeNull();
      // A service that may run only on n3 is not placed there while its runtime is unavailable.
      await sys.apply(serviceDoc('pinned', { replicas: 1, constraints: ['node.name == n3'] }));
      const pending = await sys.waitFor('pinned pending with a reason', async () => {
        const t = (await sys.service('pinned')).tasks.find((x) => x.desired === 'running');
        return t !== undefined && t.record.pendingReason !== null ? t : undefined;
      });
      expect(pending.nodeId).toBeNull();
      expect(pending.record.pendingReason).toMatch(/with its container runtime unavailable/);
      // Docker itself never went away: the container of n3 still runs.
      expect((await sys.docker.getContainer(kept.id).inspect()).State.Running).toBe(true);

      await proxy.open();
      await sys.waitFor('n3 runtime up again', async () => ((await sys.nodeView('n3')).record.runtime.status === 'up' ? true : undefined));
      const { tasks } = await sys.waitConverged('pinned');
      expect(tasks.filter((t) => t.desired === 'running').map((t) => [t.nodeName, t.observed])).toEqual([['n3', 'running']]);
      expect((await sys.containers('pinned')).map((c) => [c.nodeId, c.running])).toEqual([[n3.id, true]]);
      // n3's web container was adopted as it was, not restarted.
      const after = await sys.docker.getContainer(kept.id).inspect();
      expect([after.State.Running, after.State.StartedAt]).toEqual([true, kept.startedAt]);
      await sys.waitConverged('web');
    });
  }, 150_000);
});
