import { describe, expect, it } from 'vitest';
import { ReadWaiters } from '../../src/node/read-waiters.ts';
import { ProposalDroppedError } from '../../src/raft/types.ts';
import { ShoalError } from '../../src/errors.ts';

/** Read waiters over a fake core that refuses with `refusal` while it is set. */
function harness(holds: boolean) {
  const asked: string[] = [];
  const core = { refusal: undefined as ProposalDroppedError | undefined };
  const reads = new ReadWaiters({
    ask: (ctx) => { asked.push(ctx); if (core.refusal) throw core.refusal; },
    holdsWithoutLeader: () => holds,
  });
  return { reads, asked, core };
}

function settled<T>(p: Promise<T>): { value?: T; error?: unknown } {
  const s: { value?: T; error?: unknown } = {};
  p.then((v) => { s.value = v; }, (e: unknown) => { s.error = e; });
  return s;
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('the read waiters', () => {
  it('answer a read once the applied index reaches its read index, not before', async () => {
    const { reads, asked } = harness(true);
    const r = settled(reads.wait('1', 10_000));
    expect(asked).toEqual(['1']);
    reads.onReadStates([{ context: '1', index: 7 }, { context: 'other', index: 9 }], 6);
    await flush();
    expect(r.value).toBeUndefined();
    expect(reads.size).toBe(1);
    reads.release(7);
    await flush();
    expect(r.value).toBe(7);
    expect(reads.size).toBe(0);
  });

  it('hold a read refused for want of a leader and ask again (level 3)', async () => {
    const { reads, asked, core } = harness(true);
    core.refusal = new ProposalDroppedError('noLeader');
    const r = settled(reads.wait('1', 10_000));
    await flush();
    expect(r.error).toBeUndefined();
    core.refusal = undefined;
    reads.askUnasked();
    reads.askUnasked();
    expect(asked).toEqual(['1', '1']);
    reads.close(new Error('stop'));
    await flush();
    expect((r.error as Error).message).toBe('stop');
  });

  it('fail a read refused for want of a leader below level 3, with no_leader', async () => {
    const { reads, core } = harness(false);
    core.refusal = new ProposalDroppedError('noLeader');
    const r = settled(reads.wait('1', 10_000));
    await flush();
    expect((r.error as ShoalError).code).toBe('no_leader');
    expect(reads.size).toBe(0);
  });

  it('fail only the reads without an index on a change of leader below level 3', async () => {
    const { reads } = harness(false);
    const a = settled(reads.wait('1', 10_000));
    const b = settled(reads.wait('2', 10_000));
    reads.onReadStates([{ context: '2', index: 3 }], 1);
    reads.failUnansweredOnLeaderChange();
    await flush();
    expect((a.error as ShoalError).code).toBe('leader_changed');
    expect(b.error).toBeUndefined();
    reads.release(3);
    await flush();
    expect(b.value).toBe(3);
  });

  it('ask every read without an index again under a new leader', async () => {
    const { reads, asked } = harness(true);
    const waits = [reads.wait('1', 10_000), reads.wait('2', 10_000)].map((p) => p.catch(() => undefined));
    reads.onReadStates([{ context: '2', index: 3 }], 1);
    reads.askAllAgain();
    expect(asked).toEqual(['1', '2', '1']);
    reads.close(new Error('stop'));
    await Promise.all(waits);
  });
});
