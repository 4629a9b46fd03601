// Issue 22's scenarios 3 and 4 on a real three-process cluster running real containers on the
// machine's Docker daemon (docker-system.ts): a node's shoal process stopped for longer than the
// down timeout (the fastest allowed, 3 s), and a node drained under a start-first service. Run
// under the machine-wide lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/system/node-loss.test.ts

import { describe, expect, it } from 'vitest';
import { fewestRunning, runsOf } from './container-events.ts';
import { perNode, serviceDoc, withDockerSystem } from './docker-system.ts';

const fastHealth = { suspectAfterMs: 1_000, downAfterMs: 3_000, restartGraceMs: 3_000 };

describe('tasks of a lost or drained node on real Docker', () => {
  it('replaces the tasks of a node stopped past the down timeout; back, it removes its stale-epoch containers', async () => {
    await withDockerSystem({ control: fastHealth }, async (sys) => {
      await sys.apply(serviceDoc('web', { replicas: 3 }));
      await sys.waitConverged('web');
      const leader = await sys.leader();
      const victim = sys.cluster.nodes.filter((n) => n !== leader).at(-1);
      if (victim === undefined) throw new Error('no follower');
      const stale = (await sys.containers('web')).find((c) => c.nodeId === victim.id);
      if (stale === undefined) throw new Error(`no container on ${victim.name}`);
      const epoch = (await sys.nodeView(victim.name)).record.epoch;

      expect(await sys.cluster.stop(victim)).toBe(0);
      await sys.waitFor(`${victim.name} declared down`, async () => {
        const n = await sys.nodeView(victim.name);
        return n.record.state === 'down' && n.record.epoch === epoch + 1 ? true : undefined;
      });
      const replaced = await sys.waitConverged('web');
      expect(perNode(replaced.tasks)[victim.name]).toBeUndefined();
      expect(Object.values(perNode(replaced.tasks)).reduce((a, b) => a + b, 0)).toBe(3);
      // Nothing stopped the victim's container meanwhile: its agent was down, and no other touches it.
      expect((await sys.docker.getContainer(stale.id).inspect()).State.Running).toBe(true);

      sys.cluster.start(victim);
      await sys.waitFor(`${victim.name} removed its stale-epoch container`, async () => ((await sys.containers('web')).some((c) => c.id === stale.id) ? undefined : true));
      expect(victim.logs.join('')).toContain(`(${stale.id})`);
      await sys.waitFor(`${victim.name} ready again`, async () => ((await sys.nodeView(victim.name)).record.state === 'ready' ? true : undefined));
      const end = await sys.waitConverged('web');
      expect(end.tasks.filter((t) => t.desired === 'running')).toHaveLength(3);
      expect((await sys.containers('web')).filter((c) => c.running)).toHaveLength(3);
    });
  }, 180_000);

  it('moves a drained node\'s tasks with a start-first service never below its replica count', async () => {
    await withDockerSystem({}, async (sys) => {
      await sys.apply(serviceDoc('web', { replicas: 3, update: { order: 'start-first' } }));
      await sys.waitConverged('web');
      const log = sys.events;
      if (log === undefined) throw new Error('no event log');
      await log.catchUp(sys.cluster.clusterId);
      const fromNs = runsOf(log.events).reduce((m, r) => (r.startNs > m ? r.startNs : m), 0n);
      const drained = sys.node('n2');

      const r = await sys.api<unknown>('POST', `/v1/nodes/${drained.name}/availability`, { availability: 'drain' });
      expect(r.status).toBe(200);
      const moved = await sys.waitFor(`${drained.name} drained`, async () => {
        const s = await sys.service('web');
        const left = s.tasks.filter((t) => t.nodeId === drained.id && t.observed !== 'shutdown');
        return s.service.status.converged && left.length === 0 ? s : undefined;
      });
      expect(perNode(moved.tasks)[drained.name]).toBeUndefined();
      const running = (await sys.containers('web')).filter((c) => c.running);
      expect(running).toHaveLength(3);
      expect(running.some((c) => c.nodeId === drained.id)).toBe(false);

      await log.catchUp(sys.cluster.clusterId);
      log.assertWhole();
      const toNs = BigInt(Date.now()) * 1_000_000n;
      const runs = runsOf(log.events);
      // The drained node's container died, and the fewest running at any moment since the service first ran 3 is 3.
      expect(runs.filter((x) => x.nodeId === drained.id && x.endNs !== null)).toHaveLength(1);
      expect(fewestRunning(runs, 'web', fromNs, toNs)).toBe(3);
    });
  }, 180_000);
});
