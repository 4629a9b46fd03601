import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { changedFields, jsonEqual, specChange } from '../../../src/resources/spec/index.ts';
import { spec } from '../fixtures.ts';
import { serviceSpecArb } from './arbitrary-spec.ts';

describe('specChange', () => {
  const base = spec({ replicas: 3, env: { A: 'x', B: 'y' } });

  it('is none for an equal spec, whatever the key order', () => {
    expect(specChange(base, spec({ env: { B: 'y', A: 'x' }, replicas: 3 }))).toBe('none');
  });

  it.each([
    [{ replicas: 5 }, 'scale'],
    [{ replicas: 0 }, 'scale'],
    [{ update: { parallelism: 2 } }, 'scale'],
    [{ restart: { condition: 'never' } }, 'scale'],
    [{ placement: { strategy: 'binpack' } }, 'scale'],
    [{ maxPerNode: 1 }, 'scale'],
    [{ stopGracePeriod: '1m' }, 'scale'],
    [{ image: 'busybox:2' }, 'replace'],
    [{ env: { A: 'x', B: 'z' } }, 'replace'],
    [{ command: ['sh'] }, 'replace'],
    [{ resources: { reservations: { memory: '1Gi' } } }, 'replace'],
    [{ constraints: ['node.labels.role == db'] }, 'replace'],
    [{ ports: [{ published: 80, target: 80 }] }, 'replace'],
    [{ stopSignal: 'SIGINT' }, 'replace'],
    [{ healthCheck: { command: ['true'] } }, 'replace'],
    [{ mode: 'global', replicas: undefined }, 'replace'],
    [{ exclusive: true }, 'replace'],
    [{ secrets: ['db'] }, 'replace'],
    [{ replicas: 5, image: 'busybox:2' }, 'replace'],
  ])('%j is %s', (fields, expected) => {
    const after = spec({ replicas: 3, env: { A: 'x', B: 'y' }, ...fields });
    expect(specChange(base, after)).toBe(expected);
  });

  it('names the fields that changed', () => {
    expect(changedFields(base, spec({ replicas: 4, env: {} }))).toEqual(['env', 'replicas']);
  });

  it('is none exactly when the specs are equal', () => {
    fc.assert(fc.property(serviceSpecArb, serviceSpecArb, (a, b) => {
      expect(specChange(a, a)).toBe('none');
      expect(specChange(a, b) === 'none').toBe(jsonEqual(a, b));
    }));
  });
});

describe('jsonEqual', () => {
  it.each([
    [{ a: 1, b: [1, { c: null }] }, { b: [1, { c: null }], a: 1 }, true],
    [{ a: 1 }, { a: 1, b: undefined }, false],
    [[1, 2], [2, 1], false],
    [{ a: [] }, { a: {} }, false],
    [null, null, true],
    [null, {}, false],
  ])('%j %j: %s', (a, b, expected) => {
    expect(jsonEqual(a, b)).toBe(expected);
  });
});
