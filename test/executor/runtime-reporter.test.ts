import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { RuntimeReporter, type NodeRuntimeReport } from '../../src/executor/runtime-reporter.ts';
import { MemoryLog, RefusedWrite, flush } from './harness.ts';

const up: NodeRuntimeReport = { status: 'up', error: null, kind: 'docker' };
const down: NodeRuntimeReport = { status: 'unavailable', error: 'connect ENOENT', kind: 'docker' };

function setup(failures = 0) {
  const clock = new ManualClock();
  const log = new MemoryLog();
  const writes: { atMs: number; r: NodeRuntimeReport }[] = [];
  let left = failures;
  const reporter = new RuntimeReporter({
    clock, log, backoffMinMs: 100, backoffMaxMs: 1000,
    writer: {
      reportNodeRuntime: async (r) => {
        if (left-- > 0) throw new RefusedWrite('no_leader');
        writes.push({ atMs: clock.now(), r });
      },
    },
  });
  const step = async (ms: number) => {
    for (let t = 0; t < ms; t += 10) {
      clock.advance(10);
      await flush(2);
    }
  };
  return { reporter, writes, step, log };
}

describe('RuntimeReporter', () => {
  it('writes a value the store does not hold, once', async () => {
    const { reporter, writes, step } = setup();
    reporter.want(up, { status: 'unknown', error: null });
    reporter.want(up, { status: 'unknown', error: null });
    await step(100);
    reporter.want(up, { status: 'unknown', error: null });
    await step(100);
    expect(writes.map((w) => w.r)).toEqual([up]);
  });

  it('writes nothing when the store already holds the value', async () => {
    const { reporter, writes, step } = setup();
    reporter.want(up, { status: 'up', error: null });
    await step(100);
    expect(writes).toEqual([]);
  });

  it('writes only the newest of values wanted in a row', async () => {
    const { reporter, writes, step } = setup();
    reporter.want(down, { status: 'up', error: null });
    reporter.want(up, { status: 'unavailable', error: 'x' });
    await step(100);
    expect(writes.map((w) => w.r)).toEqual([up]);
  });

  it('retries with backoff, and after resync writes again what the store still does not show', async () => {
    const { reporter, writes, step, log } = setup(2);
    reporter.want(down, null);
    await step(1000);
    expect(writes.map((w) => w.r)).toEqual([down]);
    // Two failures: backoffs of 100 and 200 ms before the write that succeeded.
    expect(writes[0]!.atMs).toBeGreaterThanOrEqual(300);
    expect(log.matching(/runtime status failed/)).toHaveLength(1);
    reporter.want(down, { status: 'up', error: null });
    await step(100);
    expect(writes).toHaveLength(1);
    reporter.resync();
    reporter.want(down, { status: 'up', error: null });
    await step(100);
    expect(writes).toHaveLength(2);
  });
});
