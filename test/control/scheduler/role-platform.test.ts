// Issues 39/40: `node.role` and `node.platform.*` constraints in the scheduler. The role is not a
// record's: the caller passes the raft voters (a voter is a manager, any other node a worker);
// a node whose platform or role is not known is excluded with a reason that says so.

import { describe, expect, it } from 'vitest';
import { constraintsHold, demandOf, eligibleNodes, emptyUsage, schedule } from '../../../src/control/scheduler/index.ts';
import { placePending } from '../../../src/control/placement.ts';
import { compatCommand } from '../../../src/resources/record-compat.ts';
import { featureLevelPlatformConstraints } from '../../../src/base/feature-level.ts';
import { controlFeatureLevel, servicesCollection } from '../../../src/resources/collections.ts';
import { jobsCollection } from '../../../src/resources/jobs.ts';
import type { TaskRecord } from '../../../src/resources/records.ts';
import { node, pendingOf, spec } from '../fixtures.ts';
import { StateBuilder } from '../state-builder.ts';

const amd64 = { os: 'linux', architecture: 'amd64' };
const arm64 = { os: 'linux', architecture: 'arm64', variant: 'v8' };

describe('node.role', () => {
  const nodes = [node('n1', { platform: amd64 }), node('n2', { platform: arm64 }), node('n3', { platform: arm64 })];
  const voters = new Set(['n1', 'n2']);

  it('places on voters for manager, on the others for worker', () => {
    const managers = spec({ replicas: 2, constraints: ['node.role == manager'], maxPerNode: 1 });
    expect(schedule({ nodes, tasks: [], pending: pendingOf(managers, 2), voters }).placements.map((p) => p.nodeId).sort()).toEqual(['n1', 'n2']);
    const workers = spec({ replicas: 2, constraints: ['node.role != manager'] });
    expect(schedule({ nodes, tasks: [], pending: pendingOf(workers, 2), voters }).placements.map((p) => p.nodeId)).toEqual(['n3', 'n3']);
  });

  it('says which nodes the role excluded, and that roles are not known without the voters', () => {
    const s = spec({ replicas: 1, constraints: ['node.role == worker'] });
    expect(schedule({ nodes, tasks: [], pending: pendingOf(s, 1), voters: new Set(['n1', 'n2', 'n3']) }).unplaced.map((u) => u.reason))
      .toEqual(['3 nodes excluded by constraint node.role == worker (n1, n2, n3)']);
    expect(schedule({ nodes, tasks: [], pending: pendingOf(s, 1) }).unplaced.map((u) => u.reason))
      .toEqual(['3 nodes whose role (voter or learner) is not known here, so constraint node.role == worker cannot hold (n1, n2, n3)']);
  });

  it('gives a global service a slot on the nodes of the role only', () => {
    const s = spec({ mode: 'global', constraints: ['node.role == manager'] });
    expect(eligibleNodes(s, nodes, voters).map((n) => n.id)).toEqual(['n1', 'n2']);
    expect(eligibleNodes(s, nodes)).toEqual([]);
  });

  it('the placement pass takes the voters from the state', () => {
    const b = new StateBuilder().node('n1').node('n2')
      .service('apiVersion: shoal/v1\nkind: Service\nname: web\nimage: busybox:1.36\nconstraints: ["node.role == worker"]\n')
      .task({ id: 't1', service: 'web', slot: 1 });
    const placed = (voters?: Set<string>) => placePending({ ...b.build(), ...(voters !== undefined ? { voters } : {}) }, 1, 5).plan.changes
      .map((c) => (c.kind === 'put' ? c.doc as unknown as TaskRecord : undefined)).map((t) => [t?.nodeId, t?.pendingReason]);
    expect(placed(new Set(['n1']))).toEqual([['n2', null]]);
    expect(placed()[0]?.[1]).toContain('role (voter or learner) is not known');
  });
});

describe('node.platform', () => {
  it('places by os and arch; a node that has not said its platform is excluded, saying why', () => {
    const nodes = [node('n1', { platform: amd64 }), node('n2', { platform: arm64 }), node('n3')];
    const s = spec({ replicas: 1, constraints: ['node.platform.os == linux', 'node.platform.arch == aarch64'] });
    expect(schedule({ nodes, tasks: [], pending: pendingOf(s, 1) }).placements.map((p) => p.nodeId)).toEqual(['n2']);
    const none = spec({ replicas: 1, constraints: ['node.platform.arch == s390x'] });
    expect(schedule({ nodes, tasks: [], pending: pendingOf(none, 1) }).unplaced.map((u) => u.reason)).toEqual([
      '2 nodes excluded by constraint node.platform.arch == s390x (n1, n2); 1 node whose platform is not known (it runs an older release), so constraint node.platform.arch == s390x cannot hold (n3)',
    ]);
    expect(constraintsHold(node('n3'), emptyUsage(), demandOf(spec({ constraints: ['node.platform.arch != s390x'] })))?.key).toBe('constraint-unknown:node.platform.arch != s390x');
  });
});

describe('feature level', () => {
  const record = (constraints: string[]) => ({
    name: 'web', spec: spec({ constraints }), specVersion: 1, previousSpec: null, previousSpecVersion: null,
    updateStatus: { state: 'none', startedAt: null, completedAt: null, message: null }, source: null, createdAt: 1, updatedAt: 1,
  });
  const put = (collection: string, doc: object) => ({ op: 'put' as const, collection, id: 'web', doc: doc as never });
  it('a spec with a platform or role constraint needs level 6; one with label constraints only, the control plane\'s', () => {
    expect(compatCommand(put(servicesCollection, record(['node.role == manager']))).featureLevel).toBe(featureLevelPlatformConstraints);
    expect(compatCommand(put(servicesCollection, record(['node.platform.arch == amd64']))).featureLevel).toBe(featureLevelPlatformConstraints);
    expect(compatCommand(put(servicesCollection, record(['node.labels.zone == a']))).featureLevel).toBe(controlFeatureLevel);
    expect(compatCommand(put(jobsCollection, { spec: { constraints: [{ text: 'node.role == manager', attribute: 'role', label: null, operator: '==', values: ['manager'] }] } })).featureLevel)
      .toBe(featureLevelPlatformConstraints);
  });
});
