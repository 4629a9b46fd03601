// The drills' routes on one in-memory node (docs/api.md, "Drills"): each action reaches the drill
// target the node was given (a fake here: a real exit or SIGSTOP would stop the test runner),
// bad actions are refused before anything happens, and reports are kept in shoal.drills and
// listed newest first; a bad report is refused and nothing is written.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApi } from '../../src/api/app.ts';
import { Registry } from '../../src/base/metrics.ts';
import type { DrillTarget } from '../../src/node/drill/drill-actions.ts';
import type { DrillReport } from '../../src/node/drill/drill-report.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
let app: FastifyInstance;
const calls: string[] = [];
const members = [
  { id: 'a', name: 'n1', apiAddress: '127.0.0.1:1', peerAddress: '10.0.0.1:7102' },
  { id: 'b', name: 'n2', apiAddress: '127.0.0.1:2', peerAddress: '10.0.0.2:7202' },
];
const target: DrillTarget = {
  exit: (code) => calls.push(`exit ${code}`),
  stallDisk: (ms) => calls.push(`stall ${ms}`),
  peerListen: '10.0.0.1:7102',
  members: () => members,
  pid: 4242,
  isolate: async (ports, seconds) => { calls.push(`isolate ${ports.join(',')} ${seconds}`); },
  spawnPauser: (pid, seconds) => calls.push(`pause ${pid} ${seconds}`),
  holdNextStart: (seconds) => {
    calls.push(`hold ${seconds}`);
    return '/data/drill-hold.json';
  },
};

beforeAll(async () => {
  s = await singleNode();
  app = buildApi({ ...s.ctx, metrics: new Registry(), streams: new Set(), drill: target });
});
afterAll(async () => {
  await app.close();
  await s.close();
});

function report(id: string, ok = true): DrillReport {
  return {
    id, drill: 'leader-kill', startedAt: new Date().toISOString(), target: { id: 'a', name: 'n1' }, faultSeconds: null,
    leaderBefore: 'a', leaderAfter: 'b', newLeaderMs: 812, longestWriteGapMs: 900,
    writes: { attempted: 100, acknowledged: 98, failed: 2, lost: 0 }, reads: { done: 50, failed: 1, backwards: 0 },
    workloads: { runningBefore: 3, runningAfter: 3, restarted: 0, duplicated: 0 }, servicesBackMs: 0, recovered: true, recoveryMs: 2100, problems: [], ok,
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('POST /v1/drill/actions', () => {
  it('carries out each action on the node, the kill after the answer', async () => {
    const post = (payload: Record<string, unknown>) => app.inject({ method: 'POST', url: '/v1/drill/actions', payload });
    const kill = await post({ action: 'kill' });
    expect(kill.statusCode).toBe(200);
    expect(calls).toEqual([]);
    await sleep(300);
    expect(calls).toEqual(['exit 10']);
    expect((await post({ action: 'isolate', seconds: 4 })).json()).toMatchObject({ action: 'isolate', ports: [7102, 7202] });
    await post({ action: 'pause', seconds: 2 });
    await post({ action: 'disk-stall', seconds: 1.5 });
    expect(calls.slice(1)).toEqual(['isolate 7102,7202 4', 'pause 4242 2', 'stall 1500']);
  });

  it('reboots as a kill whose next start waits out the duration, with no cut', async () => {
    calls.length = 0;
    const res = await app.inject({ method: 'POST', url: '/v1/drill/actions', payload: { action: 'reboot', seconds: 6 } });
    expect(res.json()).toMatchObject({ action: 'reboot', seconds: 6, ports: [] });
    expect(res.json().message).toContain('/data/drill-hold.json');
    expect(calls).toEqual(['hold 6']);
    await sleep(300);
    expect(calls).toEqual(['hold 6', 'exit 10']);
  });

  it('refuses an unknown action, a missing or too long duration, before anything happens', async () => {
    calls.length = 0;
    for (const payload of [{ action: 'explode' }, { action: 'pause' }, { action: 'isolate', seconds: 601 }, { action: 'kill', seconds: 3 }]) {
      const res = await app.inject({ method: 'POST', url: '/v1/drill/actions', payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().code).toBe('bad_request');
    }
    await sleep(300);
    expect(calls).toEqual([]);
  });

  it('is refused by a node that takes no actions (one inside another process)', async () => {
    const res = await s.app.inject({ method: 'POST', url: '/v1/drill/actions', payload: { action: 'kill' } });
    expect(res.statusCode).toBe(500);
    expect(res.json().code).toBe('drill_action_failed');
  });
});

describe('/v1/drills', () => {
  it('keeps reports in shoal.drills and lists them newest first', async () => {
    for (const id of ['drill-aaa-1', 'drill-bbb-2']) {
      const res = await app.inject({ method: 'POST', url: '/v1/drills', payload: report(id, id.endsWith('1')) });
      expect(res.statusCode, res.body).toBe(200);
    }
    const list = await app.inject({ url: '/v1/drills' });
    expect((list.json().items as DrillReport[]).map((r) => [r.id, r.ok])).toEqual([['drill-bbb-2', false], ['drill-aaa-1', true]]);
    expect(s.store.get('shoal.drills', 'drill-aaa-1')?.doc).toMatchObject({ drill: 'leader-kill', writes: { lost: 0 } });
    expect((await app.inject({ url: '/v1/drills?limit=1' })).json().items).toHaveLength(1);
  });

  it('refuses a report that is not one, and writes nothing', async () => {
    const before = s.store.revision;
    const bad = { ...report('drill-ccc-3'), writes: { attempted: 1, acknowledged: 1, failed: 0, lost: -1 } };
    const res = await app.inject({ method: 'POST', url: '/v1/drills', payload: bad });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('bad_request');
    expect(s.store.revision).toBe(before);
  });

  it('is not written through /v1/docs (a reserved collection)', async () => {
    const res = await app.inject({ method: 'PUT', url: '/v1/docs/shoal.drills/drill-x', payload: { a: 1 } });
    expect(res.statusCode).toBe(400);
  });
});
