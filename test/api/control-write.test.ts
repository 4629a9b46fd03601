// The control routes' write path (src/api/control-write.ts): a decision is written as one
// transaction expecting what it read; a conflict (an expected revision or a compare that no longer
// holds) makes it read and decide again, a bounded number of times; nothing else is retried.

import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putChange } from '../../src/resources/changes.ts';
import { nodesCollection } from '../../src/resources/collections.ts';
import { casAttemptsMax, decideAndWrite, oneTransaction } from '../../src/api/control-write.ts';
import { ShoalError } from '../../src/errors.ts';
import { singleNode, type SingleNode } from './single-node.ts';

let s: SingleNode;
beforeAll(async () => { s = await singleNode(); });
afterAll(async () => { await s.close(); });

const req = { headers: { 'x-shoal-principal': 'tester' } } as unknown as FastifyRequest;

describe('decideAndWrite', () => {
  it('writes a decision, and decides again when what it read has changed', async () => {
    const created = await decideAndWrite(s.ctx, req, 'create', () => ({ plan: { changes: [putChange(nodesCollection, 'x', { n: 1 }, null)], compares: [] }, answer: 'created' }));
    expect(created.answer).toBe('created');
    const rev = s.store.get(nodesCollection, 'x')?.rev ?? 0;
    expect(created.rev).toBe(rev);
    let calls = 0;
    const w = await decideAndWrite(s.ctx, req, 'change', (state) => {
      calls++;
      // The first decision expects a revision that is not the current one: a conflict.
      const expected = calls === 1 ? rev + 1000 : state.revision >= rev ? rev : -1;
      return { plan: { changes: [putChange(nodesCollection, 'x', { n: 2 }, expected)], compares: [] }, answer: calls };
    });
    expect(w.answer).toBe(2);
    expect(s.store.get(nodesCollection, 'x')?.doc).toEqual({ n: 2 });
  });

  it('retries a compare that no longer holds, and gives up after casAttemptsMax rounds without writing', async () => {
    const before = s.store.revision;
    let calls = 0;
    const err = await decideAndWrite(s.ctx, req, 'never', () => {
      calls++;
      return { plan: { changes: [putChange(nodesCollection, 'y', { n: 1 }, null)], compares: [{ collection: nodesCollection, id: 'x', target: 'rev', cmp: '=', value: 1 }] }, answer: null };
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ShoalError);
    expect((err as ShoalError).code).toBe('revision_mismatch');
    expect((err as ShoalError).details).toEqual({ attempts: casAttemptsMax });
    expect(calls).toBe(casAttemptsMax);
    expect(s.store.get(nodesCollection, 'y')).toBeUndefined();
    // Refused transactions are applied as no-ops: the store changed nothing but its revision.
    expect(s.store.revision).toBeGreaterThanOrEqual(before);
  });

  it('writes nothing for a decision without changes, and passes a refusal through at once', async () => {
    const before = s.store.revision;
    expect(await decideAndWrite(s.ctx, req, 'nothing', () => ({ plan: null, answer: 'same' }))).toEqual({ answer: 'same', rev: null });
    expect(s.store.revision).toBe(before);
    let calls = 0;
    await expect(decideAndWrite(s.ctx, req, 'bad', () => {
      calls++;
      throw new ShoalError('not_found', 'no such thing');
    })).rejects.toMatchObject({ code: 'not_found' });
    expect(calls).toBe(1);
  });

  it('refuses a plan larger than one transaction', () => {
    const changes = Array.from({ length: 129 }, (_, i) => putChange(nodesCollection, `n${i}`, {}, null));
    expect(() => oneTransaction({ changes, compares: [] })).toThrow(/writes 129 records at once; one write changes at most 128/);
  });

  it('names the compares, not the changes, when a plan checks more records than one transaction may', () => {
    const changes = [putChange(nodesCollection, 'n', {}, null)];
    const compares = Array.from({ length: 129 }, (_, i) => ({ collection: nodesCollection, id: `c${i}`, target: 'exists' as const, cmp: '=' as const, value: true }));
    expect(() => oneTransaction({ changes, compares })).toThrow(/depends on 129 records staying as read .*checks at most 128/);
  });
});
