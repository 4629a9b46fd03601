// The exclusive lease's settings (src/resources/lease.ts, config `exclusive.*`): which ones keep the
// safety argument, the leader's wait with an agent that claims a longer lease, the renewal derived
// from the lease, and a node's agent renewing with the lease its config gives.

import { afterAll, describe, expect, it } from 'vitest';
import { leasesCollection } from '../../src/resources/collections.ts';
import { exclusiveClearInMs, leaseConfigProblem, leaseDefaults, renewIntervalMs, replaceAfterMs, type LeaseConfig } from '../../src/resources/lease.ts';
import { singleNode, type SingleNode } from '../api/single-node.ts';

describe('leaseConfigProblem', () => {
  it('accepts the defaults and settings whose stop-report allowance covers the second-order term', () => {
    expect(leaseConfigProblem(leaseDefaults)).toBeUndefined();
    expect(leaseConfigProblem({ leaseMs: 60_000, driftRho: 0.05, killMs: 5_000, stopReportMs: 600 })).toBeUndefined();
  });

  it('refuses settings where the leader could replace a task before the agent has killed it, saying the least allowance', () => {
    const c: LeaseConfig = { leaseMs: 60_000, driftRho: 0.05, killMs: 5_000, stopReportMs: 0 };
    const why = leaseConfigProblem(c);
    // ρ(2ρ·lease + kill)/(1−ρ) = 0.05 × (6000 + 5000) / 0.95 = 578.9… → 579
    expect(why).toMatch(/^stopReportMs must be at least 579 with leaseMs 60000, driftRho 0.05 and killMs 5000/);
    expect(leaseConfigProblem({ ...c, stopReportMs: 578 })).toBeDefined();
    expect(leaseConfigProblem({ ...c, stopReportMs: 579 })).toBeUndefined();
  });

  it('holds for every setting within the bounds once the allowance is large enough (the real-time inequality)', () => {
    for (const leaseMs of [3_000, 10_000, 600_000]) {
      for (const driftRho of [0.0005, 0.01, 0.1]) {
        for (const killMs of [1_500, 60_000]) {
          const c = { leaseMs, driftRho, killMs, stopReportMs: 60_000 };
          expect(leaseConfigProblem(c), JSON.stringify(c)).toBeUndefined();
          expect(replaceAfterMs(c) * (1 - driftRho)).toBeGreaterThanOrEqual(leaseMs * (1 + driftRho) + killMs);
        }
      }
    }
  });
});

describe('the leader\'s wait and the agent\'s renewal', () => {
  it('renews every third of the configured lease', () => {
    expect(renewIntervalMs({ ...leaseDefaults, leaseMs: 30_000 })).toBe(10_000);
    expect(renewIntervalMs(leaseDefaults)).toBe(2_666);
  });

  it('waits lease + margin from the later of the renewal and when it began watching, with the longest lease claimed', () => {
    const c = leaseDefaults;
    expect(exclusiveClearInMs(c, { nowMs: 1_000, watchingSinceMs: 1_000, agentLeaseMs: 0 })).toBe(11_160);
    expect(exclusiveClearInMs(c, { nowMs: 5_000, watchingSinceMs: 1_000, renewedAtMs: 4_000, agentLeaseMs: 10_000 })).toBe(4_000 + 10_000 + 3_200 - 5_000);
    // An agent configured with a 30 s lease: the leader waits 30 s + its margin for it (2ρ of 30 s).
    expect(exclusiveClearInMs(c, { nowMs: 1_000, watchingSinceMs: 1_000, agentLeaseMs: 30_000 })).toBe(30_000 + 600 + 3_000);
    expect(exclusiveClearInMs(c, { nowMs: 100_000, watchingSinceMs: 1_000, agentLeaseMs: 0 })).toBe(0);
  });
});

describe('a node\'s agent renews with the configured lease', () => {
  let s: SingleNode | undefined;
  afterAll(async () => { await s?.close(); });

  it('writes its renewals with exclusive.leaseMs', async () => {
    const lease: LeaseConfig = { ...leaseDefaults, leaseMs: 4_500 };
    s = await singleNode({ control: true, lease });
    const node = s;
    const doc = { apiVersion: 'shoal/v1', kind: 'Service', name: 'db', image: 'busybox', command: ['sleep', '3600'], replicas: 1, exclusive: true };
    await waitFor(async () => (await node.app.inject({ method: 'POST', url: '/v1/apply', payload: { documents: [doc] } })).statusCode === 200);
    await waitFor(() => Promise.resolve(node.store.get(leasesCollection, 'solo') !== undefined));
    expect(node.store.get(leasesCollection, 'solo')?.doc).toMatchObject({ nodeId: 'solo', leaseMs: 4_500 });
  });
});

/** Polls `check` until it holds (a bound on the wait, not a measurement). */
async function waitFor(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
