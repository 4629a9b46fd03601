// Audit records written in apply (fsm/audit.ts): one per client mutation, from feature level 4;
// with the caller's role from level 5.

import { describe, expect, it } from 'vitest';
import { auditCollection, auditId } from '../../fsm/audit.ts';
import { DocumentStore } from '../../fsm/index.ts';
import { errorOf, feeder, ok, type Feeder } from './harness.ts';

function at4(opts?: ConstructorParameters<typeof DocumentStore>[0]): Feeder {
  const f = feeder(opts);
  f.featureLevel = 4;
  return f;
}

const records = (f: Feeder) => f.store.list(auditCollection, { limit: 1000 }).items.map((d) => d.doc);

describe('audit records', () => {
  it('records a client write with its principal, op, resource, result, term, index and log time', () => {
    const f = at4();
    f.term = 7;
    ok(f.cmd({ op: 'put', collection: 'apps', id: 'a', doc: { v: 1 } }, { principal: 'alice' }));
    expect(records(f)).toEqual([{ principal: 'alice', op: 'put', resources: ['apps/a'], resourceCount: 1, result: 'ok', term: 7, index: 1, timeMs: f.ts }]);
    expect(f.store.get(auditCollection, auditId(1))?.rev).toBe(1);
    expect(f.store.revision).toBe(1);
  });

  it('records a refused conditional write with its error code and changes nothing else', () => {
    const f = at4();
    ok(f.cmd({ op: 'put', collection: 'apps', id: 'a', doc: { v: 1 } }, { principal: 'alice' }));
    expect(errorOf(f.cmd({ op: 'put', collection: 'apps', id: 'a', doc: { v: 2 }, expect: { rev: 99 } }, { principal: 'bob' })).code).toBe('revision_mismatch');
    expect(records(f).map((r) => [r.principal, r.result])).toEqual([['alice', 'ok'], ['bob', 'revision_mismatch']]);
    expect(f.store.get('apps', 'a')?.doc).toEqual({ v: 1 });
  });

  it('writes no second record for an idempotent replay, and records a key conflict', () => {
    const f = at4();
    const put = { op: 'put' as const, collection: 'apps', id: 'a', doc: { v: 1 } };
    ok(f.cmd(put, { principal: 'alice', idempotencyKey: 'k1' }));
    expect(ok(f.cmd(put, { principal: 'alice', idempotencyKey: 'k1' })).replayed).toBe(true);
    expect(records(f)).toHaveLength(1);
    expect(records(f)[0]).toMatchObject({ idempotencyKey: 'k1', result: 'ok' });
    expect(errorOf(f.cmd({ ...put, doc: { v: 2 } }, { principal: 'alice', idempotencyKey: 'k1' })).code).toBe('idempotency_conflict');
    expect(records(f).map((r) => r.result)).toEqual(['ok', 'idempotency_conflict']);
  });

  it('names the branch a txn ran, at most 20 resources and their count', () => {
    const f = at4();
    const success = Array.from({ length: 25 }, (_, i) => ({ op: 'put' as const, collection: 'c', id: `d${String(i).padStart(2, '0')}`, doc: {} }));
    ok(f.cmd({ op: 'txn', compare: [], success, failure: [] }, { principal: 'alice' }));
    ok(f.cmd({ op: 'txn', compare: [{ collection: 'c', id: 'd00', target: 'exists', cmp: '=', value: false }], success, failure: [{ op: 'delete', collection: 'c', id: 'd01' }] }, { principal: 'alice' }));
    const [first, second] = records(f);
    expect(first).toMatchObject({ op: 'txn', resourceCount: 25, succeeded: true });
    expect(first?.resources).toHaveLength(20);
    expect(second).toMatchObject({ op: 'txn', resources: ['c/d01'], resourceCount: 1, succeeded: false });
  });

  it('does not record the node\'s own writes (shoal, shoal:*) nor commands without a principal', () => {
    const f = at4();
    ok(f.cmd({ op: 'put', collection: 'a', id: '1', doc: {} }, { principal: 'shoal:leader' }));
    ok(f.cmd({ op: 'put', collection: 'a', id: '2', doc: {} }, { principal: 'shoal' }));
    ok(f.cmd({ op: 'put', collection: 'a', id: '3', doc: {} }));
    expect(records(f)).toEqual([]);
  });

  it('writes nothing below feature level 4', () => {
    for (const level of [1, 2, 3]) {
      const f = feeder();
      f.featureLevel = level;
      ok(f.cmd({ op: 'put', collection: 'a', id: '1', doc: {} }, { principal: 'alice' }));
      expect(f.store.collections()).toEqual([{ name: 'a', documents: 1 }]);
    }
  });

  it('records the caller\'s role from feature level 5', () => {
    const f = at4();
    f.featureLevel = 5;
    ok(f.cmd({ op: 'put', collection: 'apps', id: 'a', doc: {} }, { principal: 'alice', role: 'operator' }));
    ok(f.cmd({ op: 'delete', collection: 'apps', id: 'a' }, { principal: 'root', role: 'admin' }));
    ok(f.cmd({ op: 'put', collection: 'apps', id: 'b', doc: {} }, { principal: 'old-proposer' }));
    expect(records(f).map((r) => [r.principal, r.role])).toEqual([['alice', 'operator'], ['root', 'admin'], ['old-proposer', undefined]]);
    expect(records(f)[0]).toEqual({ principal: 'alice', role: 'operator', op: 'put', resources: ['apps/a'], resourceCount: 1, result: 'ok', term: 1, index: 1, timeMs: f.ts });
  });

  it('below feature level 5 refuses a command naming a role, as an older release does, and changes nothing', () => {
    for (const level of [1, 2, 3, 4]) {
      const f = feeder();
      f.featureLevel = level;
      const r = errorOf(f.cmd({ op: 'put', collection: 'apps', id: 'a', doc: {} }, { principal: 'alice', role: 'operator' }));
      expect(r.code, `level ${level}`).toBe('invalid_command');
      expect(r.message).toMatch(/role/);
      expect(f.store.collections(), `level ${level}`).toEqual([]);
      expect(f.store.revision).toBe(1);
    }
  });

  it('at level 4 records exactly what it did before roles existed', () => {
    const f = at4();
    ok(f.cmd({ op: 'put', collection: 'apps', id: 'a', doc: {} }, { principal: 'alice' }));
    expect(Object.keys(records(f)[0] ?? {})).not.toContain('role');
  });

  it('keeps the newest auditRetainedMax records', () => {
    const f = at4({ auditRetainedMax: 3 });
    for (let i = 0; i < 10; i++) ok(f.cmd({ op: 'put', collection: 'a', id: `${i}`, doc: {} }, { principal: 'alice' }));
    expect(f.store.list(auditCollection).items.map((d) => d.id)).toEqual([8, 9, 10].map(auditId));
  });

  it('trims records older than auditRetainedMs of log time', () => {
    const f = at4({ auditRetainedMs: 1000 });
    ok(f.cmd({ op: 'put', collection: 'a', id: '1', doc: {} }, { principal: 'alice' }));
    f.ts += 600;
    ok(f.cmd({ op: 'put', collection: 'a', id: '2', doc: {} }, { principal: 'alice' }));
    f.ts += 600;
    ok(f.cmd({ op: 'put', collection: 'a', id: '3', doc: {} }, { principal: 'alice' }));
    expect(f.store.list(auditCollection).items.map((d) => d.id)).toEqual([2, 3].map(auditId));
  });

  it('trims at most 64 records by age in one entry', () => {
    const f = at4({ auditRetainedMs: 1000 });
    for (let i = 0; i < 100; i++) ok(f.cmd({ op: 'put', collection: 'a', id: `${i}`, doc: {} }, { principal: 'alice' }));
    f.ts += 5000;
    ok(f.cmd({ op: 'put', collection: 'a', id: 'late', doc: {} }, { principal: 'alice' }));
    expect(f.store.list(auditCollection, { limit: 1000 }).items).toHaveLength(100 - 64 + 1);
    ok(f.cmd({ op: 'put', collection: 'a', id: 'later', doc: {} }, { principal: 'alice' }));
    expect(f.store.list(auditCollection, { limit: 1000 }).items.map((d) => d.id)).toEqual([101, 102].map(auditId));
  });

  it('names the ops of a refused txn\'s branch with the error code', () => {
    const f = at4();
    const r = f.cmd({ op: 'txn', compare: [], success: [{ op: 'delete', collection: 'c', id: 'gone' }], failure: [{ op: 'delete', collection: 'c', id: 'other' }] }, { principal: 'alice' });
    expect(errorOf(r).code).toBe('not_found');
    expect(records(f)[0]).toMatchObject({ op: 'txn', resources: ['c/gone'], result: 'not_found' });
  });

  it('emits watch events for records (watchable), and snapshots carry them', () => {
    const f = at4({ auditRetainedMax: 1 });
    ok(f.cmd({ op: 'put', collection: 'a', id: '1', doc: {} }, { principal: 'alice' }));
    ok(f.cmd({ op: 'put', collection: 'a', id: '2', doc: {} }, { principal: 'alice' }));
    const evs = f.store.eventsSince(0, { collection: auditCollection }).map((e) => [e.rev, e.type, e.id]);
    expect(evs).toEqual([[1, 'put', auditId(1)], [2, 'delete', auditId(1)], [2, 'put', auditId(2)]]);
    const copy = new DocumentStore();
    copy.restore(f.store.snapshot());
    expect(copy.list(auditCollection).items).toEqual(f.store.list(auditCollection).items);
  });
});
