import { describe, expect, it } from 'vitest';
import type { TaskStatus } from '../../src/resources/records.ts';
import { ManualClock } from '../../src/executor/manual-clock.ts';
import { StatusReporter, isStaleEpoch } from '../../src/executor/status-reporter.ts';
import { MemoryLog, RefusedWrite, flush } from './harness.ts';

function st(taskId: string, o: Partial<TaskStatus> = {}): TaskStatus {
  return { taskId, nodeId: 'n1', nodeEpoch: 0, state: 'running', containerId: `c-${taskId}`, exitCode: null, health: null, message: null, startedAt: 1, finishedAt: null, ...o };
}

function setup(fail: (batch: TaskStatus[], n: number) => string | null = () => null) {
  const clock = new ManualClock();
  const log = new MemoryLog();
  const writes: { atMs: number; batch: TaskStatus[] }[] = [];
  let attempts = 0;
  const written: TaskStatus[][] = [];
  const reporter = new StatusReporter({
    clock, log, limits: { intervalMinMs: 200, batchMax: 3, backoffMinMs: 100, backoffMaxMs: 400 },
    writer: {
      reportTaskStatus: async (batch) => {
        attempts++;
        const code = fail(batch, attempts);
        if (code !== null) throw new RefusedWrite(code);
        writes.push({ atMs: clock.now(), batch });
      },
    },
    onWritten: (b) => written.push(b),
  });
  const step = async (ms: number) => {
    for (let t = 0; t < ms; t += 10) {
      clock.advance(10);
      await flush(2);
    }
  };
  return { clock, log, writes, reporter, step, attempts: () => attempts, written };
}

describe('StatusReporter', () => {
  it('writes what was submitted together in one write, then waits the interval before the next', async () => {
    const { reporter, writes, step } = setup();
    reporter.submit(st('a'));
    reporter.submit(st('b'));
    await step(10);
    expect(writes.map((w) => w.batch.map((s) => s.taskId))).toEqual([['a', 'b']]);
    reporter.submit(st('c'));
    await step(100);
    expect(writes).toHaveLength(1);
    await step(200);
    expect(writes.map((w) => w.atMs)).toEqual([0, 200]);
  });

  it('coalesces per task: the newest report wins, and one equal to the last written is not written again', async () => {
    const { reporter, writes, step } = setup();
    reporter.submit(st('a', { state: 'starting', containerId: null }));
    reporter.submit(st('a'));
    await step(10);
    reporter.submit(st('a'));
    await step(500);
    expect(writes.map((w) => w.batch)).toEqual([[st('a')]]);
  });

  it('writes at most batchMax reports at once, and one epoch per write', async () => {
    const { reporter, writes, step } = setup();
    for (const id of ['a', 'b', 'c', 'd']) reporter.submit(st(id));
    reporter.submit(st('e', { nodeEpoch: 1 }));
    await step(1000);
    expect(writes.map((w) => w.batch.map((s) => `${s.taskId}@${s.nodeEpoch}`))).toEqual([['a@0', 'b@0', 'c@0'], ['d@0'], ['e@1']]);
  });

  it('retries a failed write with backoff, a newer report of the same task replacing the failed one', async () => {
    const { reporter, writes, step, attempts, log } = setup((_b, n) => (n <= 3 ? 'no_leader' : null));
    reporter.submit(st('a', { state: 'starting' }));
    await step(10);
    reporter.submit(st('a'));
    await step(2000);
    expect(attempts()).toBe(4);
    expect(writes.map((w) => w.batch)).toEqual([[st('a')]]);
    // Backoff 100, 200, 400 after the failures at 0, 100, 300: the write at 700.
    expect(writes[0]?.atMs).toBe(700);
    expect(log.matching(/failed/)).toHaveLength(1);
  });

  it('drops a batch refused as stale_epoch, with every pending report of that epoch, and does not retry', async () => {
    const { reporter, writes, step, attempts, log } = setup((b) => (b[0]?.nodeEpoch === 0 ? 'stale_epoch' : null));
    for (const id of ['a', 'b', 'c', 'd']) reporter.submit(st(id));
    reporter.submit(st('e', { nodeEpoch: 1 }));
    await step(2000);
    expect(attempts()).toBe(2);
    expect(writes.map((w) => w.batch.map((s) => s.taskId))).toEqual([['e']]);
    expect(log.matching(/4 task reports of epoch 0 dropped/)).toHaveLength(1);
    expect(reporter.pendingCount()).toBe(0);
  });

  it('tells what was written, and knows the newest report of each task', async () => {
    const { reporter, written, step } = setup();
    reporter.submit(st('a'));
    await step(10);
    reporter.submit(st('b'));
    expect([...reporter.latest().keys()]).toEqual(['a', 'b']);
    await step(300);
    expect(written).toEqual([[st('a')], [st('b')]]);
    reporter.retain(new Set(['b']));
    expect([...reporter.latest().keys()]).toEqual(['b']);
  });

  it('close stops writing and is idempotent', async () => {
    const { reporter, writes, step } = setup();
    await reporter.close();
    await reporter.close();
    reporter.submit(st('a'));
    await step(500);
    expect(writes).toEqual([]);
  });
});

describe('isStaleEpoch', () => {
  it('is the writer\'s stale_epoch code and nothing else', () => {
    expect(isStaleEpoch(new RefusedWrite('stale_epoch'))).toBe(true);
    expect(isStaleEpoch({ code: 'stale_epoch' })).toBe(true);
    expect(isStaleEpoch(new RefusedWrite('no_leader'))).toBe(false);
    expect(isStaleEpoch(new Error('stale_epoch'))).toBe(false);
    expect(isStaleEpoch(null)).toBe(false);
  });
});
