// The clock rule at the leader's loops (src/control/leader-run.ts, job-loop.ts): with a real
// store and fake ports, a job's due run is not created while the `jobClockHold` port says why,
// and is created within a few seconds once the hold ends (not at the next scheduled time).

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { CommandResult, JsonObject } from '../../fsm/types.ts';
import { LeaderRun } from '../../src/control/leader-run.ts';
import { clockHoldRecheckMs } from '../../src/control/job-loop.ts';
import { nodeHealthDefaults } from '../../src/control/node-health.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import type { Timer } from '../../src/executor/clock.ts';
import { controlFeatureLevel, nodesCollection } from '../../src/resources/collections.ts';
import { jobRunsCollection, jobsCollection, newJob, type JobRunRecord } from '../../src/resources/jobs.ts';
import type { NodeRecord } from '../../src/resources/records.ts';
import { allDocs } from '../../src/resources/state.ts';
import { jobSpecOf } from './job-model.ts';

const t0 = Date.parse('2026-12-06T00:00:00Z');

function setup() {
  const clock = new ManualClock(t0);
  const store = new DocumentStore();
  let index = 0;
  const apply = (cmd: Parameters<typeof encodeCommand>[0]['cmd']): CommandResult =>
    store.apply({ index: ++index, term: 1, data: encodeCommand({ cmd, ts: clock.now(), principal: 'shoal:test' }), logTimeMs: clock.now(), featureLevel: controlFeatureLevel });
  for (const id of ['n1', 'n2', 'n3']) {
    const rec: NodeRecord = {
      id, name: id, addresses: { api: `${id}:1`, peer: `${id}:2` }, capacity: { cpuMillis: 1000, memoryBytes: 1 << 30 }, labels: {},
      availability: 'active', state: 'ready', epoch: 0, runtime: { status: 'up', error: null }, softwareVersion: 't', mesh: null,
    };
    const { mesh: _mesh, ...doc } = rec;
    apply({ op: 'put', collection: nodesCollection, id, doc: doc as unknown as JsonObject });
  }
  const spec = jobSpecOf(`apiVersion: shoal/v1
kind: Job
name: backup
image: busybox:local
command: ["true"]
schedule: "@every 60s"
`);
  apply({ op: 'put', collection: jobsCollection, id: 'backup', doc: newJob(spec, clock.now(), null) as unknown as JsonObject });
  const hold = { reason: null as string | null, asked: 0 };
  let ids = 0;
  const run = new LeaderRun({
    store, clock: { now: () => clock.now(), setTimeout: (fn, ms) => clock.setTimer(ms, fn), clearTimeout: (h) => (h as Timer).cancel() },
    logTimeNow: () => clock.now(), self: 'n1', members: () => new Set(['n1', 'n2', 'n3']), health: nodeHealthDefaults,
    silentForMs: () => 0,
    peerContact: () => ({ heardAgoMs: 0, watchingForMs: 600_000, link: 'connected', goodbye: false, refused: false }),
    propose: async (data, term) => {
      await Promise.resolve();
      return { index: index + 1, result: store.apply({ index: ++index, term, data, logTimeMs: clock.now(), featureLevel: controlFeatureLevel }) };
    },
    settleOwnProposals: async () => {},
    newTaskId: () => `t${++ids}`,
    log: { debug: () => {}, warn: () => {} },
    jobClockHold: () => {
      hold.asked++;
      return hold.reason;
    },
  }, 1);
  const runs = (): JobRunRecord[] => [...allDocs(store, jobRunsCollection)].map((d) => d.doc as unknown as JobRunRecord);
  const advance = async (ms: number): Promise<void> => {
    for (let t = 0; t < ms; t += 100) {
      clock.advance(100);
      for (let i = 0; i < 10; i++) await Promise.resolve();
    }
  };
  return { run, hold, runs, advance };
}

describe('the leader\'s job loop under the clock rule', () => {
  it('creates no due run while held, and creates it within the recheck once the hold ends', async () => {
    const t = setup();
    t.hold.reason = "this leader's clock is not synchronized";
    t.run.start();
    await t.advance(65_000);
    expect(t.hold.asked).toBeGreaterThan(0);
    expect(t.runs()).toEqual([]);
    t.hold.reason = null;
    await t.advance(clockHoldRecheckMs + 500);
    expect(t.runs().map((r) => r.scheduledAt)).toEqual([t0 + 60_000]);
    t.run.stop();
    await t.run.done;
  });

  it('without a hold, the run is created at its time (the same world, for contrast)', async () => {
    const t = setup();
    t.run.start();
    await t.advance(60_500);
    expect(t.runs().map((r) => r.scheduledAt)).toEqual([t0 + 60_000]);
    t.run.stop();
    await t.run.done;
  });
});
