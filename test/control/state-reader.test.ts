// The control state reader reads only what changed since its previous read (src/resources/state.ts):
// whatever the writes, deletes, malformed documents and dropped events in between, each read
// equals a full read of the same store by a fresh reader, maps in the same (id) order; at an
// unchanged revision it is the same state.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand, type JsonObject } from '../../fsm/index.ts';
import { nodesCollection, servicesCollection, tasksCollection } from '../../src/resources/collections.ts';
import { ControlStateReader, tasksOf, tasksOnNode, type ControlState } from '../../src/resources/state.ts';
import { serviceYaml, StateBuilder } from './state-builder.ts';

const built = new StateBuilder().node('node1').service(serviceYaml('web')).placed('t1', 'web', 1, 'node1', 'running', { observed: 'running' }).build();
const template = {
  [nodesCollection]: built.nodes.get('node1')?.value,
  [servicesCollection]: built.services.get('web')?.value,
  [tasksCollection]: built.tasks.get('t1')?.value,
} as Record<string, unknown>;

interface DocOp { kind: 'put' | 'bad' | 'delete'; collection: string; id: string; n: number }
type Op = DocOp | { kind: 'read' } | { kind: 'compact' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constantFrom('put', 'put', 'bad', 'delete') as fc.Arbitrary<'put' | 'bad' | 'delete'>, collection: fc.constantFrom(nodesCollection, servicesCollection, tasksCollection), id: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'z', 'm'), n: fc.nat(9) }),
  fc.constant({ kind: 'read' } as const),
  fc.constant({ kind: 'compact' } as const),
);

/** Each collection as [id, value, rev] in the map's iteration order. */
function entries(s: ControlState): unknown {
  return Object.fromEntries(Object.entries(s).filter(([, v]) => v instanceof Map).map(([k, v]) => [k, [...(v as Map<string, { value: unknown; rev: number }>)].map(([id, e]) => [id, e.value, e.rev])]));
}

function storeOf(eventsRetainedMax: number) {
  const store = new DocumentStore({ eventsRetainedMax });
  let index = 0;
  const apply = (cmd: unknown): void => {
    store.apply({ index: ++index, term: 1, data: encodeCommand({ cmd: cmd as never, ts: 1, principal: 'shoal:test' }), logTimeMs: 1, featureLevel: 6 });
  };
  return { store, apply };
}

function docOf(op: DocOp): JsonObject {
  if (op.kind === 'bad') return { not: 'a record', n: op.n };
  const t = template[op.collection] as Record<string, unknown>;
  if (op.collection === tasksCollection) return { ...t, id: op.id, slot: op.n + 1, service: op.n % 2 === 0 ? 'web' : 'a', message: `m${op.n}` } as JsonObject;
  if (op.collection === nodesCollection) return { ...t, id: op.id, name: op.id } as JsonObject;
  const spec = t.spec as Record<string, unknown>;
  return { ...t, name: op.id, spec: { ...spec, name: op.id }, updatedAt: op.n } as JsonObject;
}

describe('the control state reader', () => {
  it('reads after any writes what a full read of the store gives, in the same order', () => {
    const seen: number[][] = [];
    fc.assert(fc.property(fc.array(opArb, { minLength: 40, maxLength: 150 }), fc.constantFrom(3, 10_000), (ops, retained) => {
      const { store, apply } = storeOf(retained);
      const reader = new ControlStateReader(store);
      const check = (): void => {
        const incremental = reader.read();
        expect(entries(incremental)).toEqual(entries(new ControlStateReader(store).read()));
        expect(incremental.revision).toBe(store.revision);
        // tasksOf's index per tasks map: what a scan of every task gives.
        for (const service of ['web', 'a', 'b']) {
          const scan = [...incremental.tasks.values()].filter((t) => t.value.service === service).map((t) => t.value.id).sort();
          expect(tasksOf(incremental, service).map((t) => t.value.id).sort()).toEqual(scan);
        }
        const onNode1 = [...incremental.tasks.values()].filter((t) => t.value.nodeId === 'node1').map((t) => t.value.id);
        expect(tasksOnNode(incremental, 'node1').map((t) => t.value.id)).toEqual(onNode1);
      };
      for (const op of ops) {
        if (op.kind === 'read') check();
        else if (op.kind === 'compact') apply({ op: 'compact' });
        else if (op.kind === 'delete') { if (store.get(op.collection, op.id) !== undefined) apply({ op: 'delete', collection: op.collection, id: op.id }); }
        else apply({ op: 'put', collection: op.collection, id: op.id, doc: docOf(op) });
      }
      check();
      const last = reader.read();
      seen.push([last.nodes.size, last.services.size, last.tasks.size]);
    }), { numRuns: 200 });
    // Not vacuous: the runs read records of every kind.

    for (const k of [0, 1, 2]) expect(Math.max(...seen.map((x) => x[k] ?? 0))).toBeGreaterThan(2);
  });

  it('is the same state at the same revision, and a new one after a write', () => {
    const { store, apply } = storeOf(10_000);
    const reader = new ControlStateReader(store);
    apply({ op: 'put', collection: tasksCollection, id: 'a', doc: docOf({ kind: 'put', collection: tasksCollection, id: 'a', n: 1 }) });
    const first = reader.read();
    expect(reader.read()).toBe(first);
    apply({ op: 'put', collection: nodesCollection, id: 'n', doc: docOf({ kind: 'put', collection: nodesCollection, id: 'n', n: 1 }) });
    const second = reader.read();
    expect(second).not.toBe(first);
    // Only the nodes changed: the tasks' map is shared, the first state is untouched.
    expect(second.tasks).toBe(first.tasks);
    expect(first.nodes.size).toBe(0);
    expect(second.nodes.size).toBe(1);
  });

  it('reads the whole store again after a restore to an earlier revision', () => {
    const { store, apply } = storeOf(10_000);
    apply({ op: 'put', collection: tasksCollection, id: 'a', doc: docOf({ kind: 'put', collection: tasksCollection, id: 'a', n: 1 }) });
    const early = store.snapshot();
    const reader = new ControlStateReader(store);
    apply({ op: 'put', collection: tasksCollection, id: 'b', doc: docOf({ kind: 'put', collection: tasksCollection, id: 'b', n: 2 }) });
    expect([...reader.read().tasks.keys()]).toEqual(['a', 'b']);
    store.restore(early);
    expect([...reader.read().tasks.keys()]).toEqual(['a']);
  });
});
