import { describe, expect, it } from 'vitest';
import {
  nodeRecordSchema, serviceRecordSchema, specForTask, taskRecordSchema, type ServiceRecord,
} from '../../src/resources/records.ts';
import { node, spec, task } from './fixtures.ts';

function service(overrides: Partial<ServiceRecord> = {}): ServiceRecord {
  return {
    name: 'web', spec: spec(), specVersion: 1, previousSpec: null, previousSpecVersion: null,
    updateStatus: { state: 'none', startedAt: null, completedAt: null, message: null }, source: null, forcedDisruptions: [], createdAt: 5, updatedAt: 5, ...overrides,
  };
}

describe('record schemas', () => {
  it('accept well-formed records', () => {
    expect(nodeRecordSchema.parse(node('n1', { labels: { role: 'db', 'example.com/zone': 'a' } }))).toMatchObject({ id: 'n1' });
    expect(serviceRecordSchema.parse(service())).toMatchObject({ name: 'web' });
    expect(taskRecordSchema.parse(task('t1', { slot: 'n1', nodeId: 'n1' }))).toMatchObject({ slot: 'n1' });
  });

  it.each([
    ['an unknown field', () => nodeRecordSchema.safeParse({ ...node('n1'), extra: 1 })],
    ['a missing field (null is "none", absent is refused)', () => nodeRecordSchema.safeParse({ ...node('n1'), runtime: { status: 'up' } })],
    ['a bad availability', () => nodeRecordSchema.safeParse({ ...node('n1'), availability: 'cordon' })],
    ['a label key with spaces', () => nodeRecordSchema.safeParse(node('n1', { labels: { 'a b': 'c' } }))],
    ['a label value with a comma', () => nodeRecordSchema.safeParse(node('n1', { labels: { a: 'b,c' } }))],
    ['a negative epoch', () => nodeRecordSchema.safeParse(node('n1', { epoch: -1 }))],
    ['a service name unlike its spec', () => serviceRecordSchema.safeParse(service({ name: 'other' }))],
    ['a previous spec without its version', () => serviceRecordSchema.safeParse(service({ previousSpec: spec() }))],
    ['a spec with a missing default', () => serviceRecordSchema.safeParse(service({ spec: { ...spec(), logs: undefined } as never }))],
    ['a task slot of 0', () => taskRecordSchema.safeParse(task('t', { slot: 0 }))],
    ['a bad observed state', () => taskRecordSchema.safeParse({ ...task('t'), observed: 'lost' })],
    ['a fractional time', () => taskRecordSchema.safeParse(task('t', { createdAt: 1.5 }))],
  ])('refuse %s', (_what, run) => {
    expect(run().success).toBe(false);
  });
});

describe('specForTask', () => {
  const v1 = spec({ image: 'busybox:1' });
  const v2 = spec({ image: 'busybox:2' });
  const s = service({ spec: v2, specVersion: 2, previousSpec: v1, previousSpecVersion: 1 });

  it('gives the spec of the task\'s version, current or previous', () => {
    expect(specForTask(s, task('a', { specVersion: 2 }))).toBe(v2);
    expect(specForTask(s, task('b', { specVersion: 1 }))).toBe(v1);
    expect(specForTask(s, task('c', { specVersion: 7 }))).toBeNull();
    expect(specForTask(service(), task('d', { specVersion: 2 }))).toBeNull();
  });
});
