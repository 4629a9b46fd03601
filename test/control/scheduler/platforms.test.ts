// Issue 40: a task goes only to a node whose platform its image offers, and a task that fits
// nowhere for that reason says so, naming the platforms.

import { describe, expect, it } from 'vitest';
import { demandOf, emptyUsage, platformOffered, schedule } from '../../../src/control/scheduler/index.ts';
import type { Platform } from '../../../src/resources/records.ts';
import { node, pendingOf, spec } from '../fixtures.ts';

const amd64: Platform = { os: 'linux', architecture: 'amd64' };
const arm64: Platform = { os: 'linux', architecture: 'arm64', variant: 'v8' };
const armv7: Platform = { os: 'linux', architecture: 'arm', variant: 'v7' };

describe('platformOffered', () => {
  const web = spec();
  it('passes a node whose platform the image offers, or when either side is not known', () => {
    expect(platformOffered(node('n1', { platform: amd64 }), emptyUsage(), demandOf(web, [amd64, arm64]))).toBeNull();
    expect(platformOffered(node('n1', { platform: { os: 'linux', architecture: 'arm64' } }), emptyUsage(), demandOf(web, [arm64]))).toBeNull();
    expect(platformOffered(node('n1'), emptyUsage(), demandOf(web, [amd64]))).toBeNull();
    expect(platformOffered(node('n1', { platform: arm64 }), emptyUsage(), demandOf(web))).toBeNull();
  });

  it('refuses one it does not offer, with both platforms', () => {
    expect(platformOffered(node('n1', { platform: arm64 }), emptyUsage(), demandOf(web, [amd64]))).toEqual({
      key: 'platform:linux/arm64/v8', phrase: 'linux/arm64/v8 (the image offers linux/amd64 only)',
    });
    expect(platformOffered(node('n1', { platform: { os: 'linux', architecture: 'arm', variant: 'v6' } }), emptyUsage(), demandOf(web, [armv7]))?.phrase)
      .toBe('linux/arm/v6 (the image offers linux/arm/v7 only)');
  });
});

describe('schedule by platform', () => {
  it('places on the nodes of an offered platform only, and a task that fits nowhere says why', () => {
    const web = spec({ replicas: 2 });
    const nodes = [node('n1', { platform: amd64 }), node('n2', { platform: arm64 }), node('n3', { platform: arm64 })];
    const placed = schedule({ nodes, tasks: [], pending: pendingOf(web, 2).map((t) => ({ ...t, platforms: [amd64] })) });
    expect(placed.placements.map((p) => p.nodeId)).toEqual(['n1', 'n1']);
    const none = schedule({ nodes, tasks: [], pending: pendingOf(web, 1).map((t) => ({ ...t, platforms: [{ os: 'linux', architecture: 's390x' }] })) });
    expect(none.unplaced.map((u) => u.reason)).toEqual([
      '1 node linux/amd64 (the image offers linux/s390x only) (n1); 2 nodes linux/arm64/v8 (the image offers linux/s390x only) (n2, n3)',
    ]);
  });
});
