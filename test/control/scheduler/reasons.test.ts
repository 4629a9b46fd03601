import { describe, expect, it } from 'vitest';
import { explain } from '../../../src/control/scheduler/index.ts';

const r = (stage: number, key: string, phrase: string, nodeName: string) => ({ stage, rejection: { key, phrase }, nodeName });

describe('explain', () => {
  it('counts nodes per reason, closest to a fit first, names listed', () => {
    expect(explain([
      r(3, 'constraint:x', 'excluded by constraint node.labels.role == db', 'n1'),
      r(4, 'resources:memory', 'without 2 GiB memory free', 'n2'),
      r(3, 'constraint:x', 'excluded by constraint node.labels.role == db', 'n3'),
      r(4, 'resources:memory', 'without 2 GiB memory free', 'n4'),
      r(4, 'resources:memory', 'without 2 GiB memory free', 'n5'),
    ])).toBe('3 nodes without 2 GiB memory free (n2, n4, n5); 2 nodes excluded by constraint node.labels.role == db (n1, n3)');
  });

  it('keeps different reasons of one stage apart, in order of first appearance', () => {
    expect(explain([r(1, 'availability:drain', 'draining', 'a'), r(1, 'availability:pause', 'paused', 'b'), r(1, 'availability:drain', 'draining', 'c')]))
      .toBe('2 nodes draining (a, c); 1 node paused (b)');
  });

  it('shortens long name lists', () => {
    expect(explain(['a', 'b', 'c', 'd', 'e'].map((n) => r(0, 'state:down', 'down', n)))).toBe('5 nodes down (a, b, c, +2 more)');
  });

  it('says when there is no node at all', () => {
    expect(explain([])).toBe('no nodes in the cluster');
  });
});
