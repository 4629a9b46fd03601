// The events one change of a job run makes (src/node/events/job-events.ts).

import { describe, expect, it } from 'vitest';
import { jobEventsOf } from '../../src/node/events/job-events.ts';

const run = (over: Record<string, unknown> = {}) => ({
  job: 'backup', state: 'pending', attempts: 0, nodeId: null, exitCode: null, message: null, scheduledAt: 5_000, cause: 'schedule', ...over,
}) as Parameters<typeof jobEventsOf>[1];

describe('job events', () => {
  it('started, succeeded, failed, missed, cancelled', () => {
    expect(jobEventsOf(undefined, run()).map((e) => e.type)).toEqual([]);
    expect(jobEventsOf(run(), run({ state: 'running', attempts: 1 })).map((e) => e.type)).toEqual(['job.started']);
    expect(jobEventsOf(run({ state: 'running', attempts: 1 }), run({ state: 'succeeded', attempts: 1, exitCode: 0, nodeId: 'n1' }))).toEqual([
      { type: 'job.succeeded', details: { job: 'backup', scheduledAt: 5_000, cause: 'schedule', attempts: 1, node: 'n1' } },
    ]);
    // A retry under the same run id is started again; a run that fails for good says why.
    expect(jobEventsOf(run({ state: 'pending', attempts: 1 }), run({ state: 'running', attempts: 2 })).map((e) => e.type)).toEqual(['job.started']);
    expect(jobEventsOf(run({ state: 'running', attempts: 2 }), run({ state: 'failed', attempts: 2, exitCode: 3, message: 'boom' }))[0]).toMatchObject({ type: 'job.failed', details: { exitCode: 3, message: 'boom' } });
    expect(jobEventsOf(undefined, run({ state: 'missed', message: 'late' })).map((e) => e.type)).toEqual(['job.missed']);
    expect(jobEventsOf(run({ state: 'running', attempts: 1 }), run({ state: 'cancelled', attempts: 1 })).map((e) => e.type)).toEqual(['job.cancelled']);
    // The same state again (another field changed): nothing.
    expect(jobEventsOf(run({ state: 'running', attempts: 1 }), run({ state: 'running', attempts: 1, nodeId: 'n2' }))).toEqual([]);
  });
});
