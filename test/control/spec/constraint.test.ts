import { describe, expect, it } from 'vitest';
import { constraintUnknown, contradiction, matchesConstraint, parseConstraint, type Constraint } from '../../../src/resources/spec/constraint.ts';

function parsed(text: string): Constraint {
  const r = parseConstraint(text);
  if (!r.ok) throw new Error(r.message);
  return r.constraint;
}

describe('parseConstraint', () => {
  it.each([
    ['node.labels.role == db', { attribute: 'label', label: 'role', operator: '==', values: ['db'], text: 'node.labels.role == db' }],
    ['node.labels.role==db', { attribute: 'label', label: 'role', operator: '==', values: ['db'], text: 'node.labels.role == db' }],
    ['node.labels.role != db', { attribute: 'label', label: 'role', operator: '!=', values: ['db'], text: 'node.labels.role != db' }],
    ['node.labels.zone in (b, a, b)', { attribute: 'label', label: 'zone', operator: 'in', values: ['a', 'b'], text: 'node.labels.zone in (a, b)' }],
    ['node.name == n2', { attribute: 'name', label: null, operator: '==', values: ['n2'], text: 'node.name == n2' }],
    ['node.id in (x1,x2)', { attribute: 'id', label: null, operator: 'in', values: ['x1', 'x2'], text: 'node.id in (x1, x2)' }],
    ['node.labels.example.com/disk == ssd', { attribute: 'label', label: 'example.com/disk', operator: '==', values: ['ssd'], text: 'node.labels.example.com/disk == ssd' }],
  ] as const)('%s', (text, expected) => {
    expect(parsed(text)).toEqual(expected);
  });

  it.each([
    ['node.labels.role = db', 'not a constraint'],
    ['node.hostname == n1', 'node.name here'],
    ['node.labels.role ~= db', 'not a constraint'],
    ['node.labels.role == ', 'not a value'],
    ['node.labels.role == a b', 'not a value'],
    ['node.labels.role in a, b', 'parenthesized list'],
    ['node.labels.role in (a, )', 'not a value'],
    ['node.labels.-x == a', 'not a label key'],
    ['labels.role == db', 'not a constraint'],
    ['node.labels.role == "db"', 'not a value'],
  ])('refuses %s', (text, why) => {
    const r = parseConstraint(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toContain(why);
  });
});

describe('matchesConstraint', () => {
  const n = { id: 'id1', name: 'n1', labels: { role: 'db', zone: 'a' } };
  const bare = { id: 'id2', name: 'n2', labels: {} };
  it.each([
    ['node.labels.role == db', true, false],
    ['node.labels.role != db', false, true],
    ['node.labels.role != web', true, true],
    ['node.labels.zone in (a, b)', true, false],
    ['node.labels.zone in (b, c)', false, false],
    ['node.name == n1', true, false],
    ['node.name != n1', false, true],
    ['node.id == id2', false, true],
  ])('%s: labelled %s, bare %s', (text, labelled, unlabelled) => {
    expect(matchesConstraint(parsed(text), n)).toBe(labelled);
    expect(matchesConstraint(parsed(text), bare)).toBe(unlabelled);
  });
});

describe('contradiction', () => {
  it.each([
    [['node.labels.role == db', 'node.labels.role == web'], true],
    [['node.labels.role == db', 'node.labels.role != db'], true],
    [['node.labels.role == db', 'node.labels.role in (a, b)'], true],
    [['node.labels.role == db', 'node.labels.role in (db, b)'], false],
    [['node.labels.role == db', 'node.labels.zone == db'], false],
    [['node.labels.role == db', 'node.labels.role == db'], false],
    [['node.name == n1', 'node.labels.name == n2'], false],
  ])('%j contradicts: %s', (texts, expected) => {
    expect(contradiction(texts.map(parsed)) !== null).toBe(expected);
  });
});

describe('platform and role constraints (Swarm\'s names)', () => {
  it.each([
    ['node.platform.os == linux', { attribute: 'os', label: null, operator: '==', values: ['linux'], text: 'node.platform.os == linux' }],
    ['node.platform.arch != x86_64', { attribute: 'arch', label: null, operator: '!=', values: ['amd64'], text: 'node.platform.arch != amd64' }],
    ['node.platform.arch in (aarch64, armv7l, arm64)', { attribute: 'arch', label: null, operator: 'in', values: ['arm/v7', 'arm64'], text: 'node.platform.arch in (arm/v7, arm64)' }],
    ['node.role==manager', { attribute: 'role', label: null, operator: '==', values: ['manager'], text: 'node.role == manager' }],
    ['node.role != worker', { attribute: 'role', label: null, operator: '!=', values: ['worker'], text: 'node.role != worker' }],
  ] as const)('%s', (text, expected) => {
    expect(parsed(text)).toEqual(expected);
  });

  it.each([
    ['node.role == leader', 'not a node role: write manager (a raft voter) or worker (a learner)'],
    ['node.role in (manager, voter)', '"voter" is not a node role'],
    ['node.platform.os == linux-gnu', 'not an operating system an image names'],
    ['node.platform.arch == sparc', 'not an architecture an image names'],
    ['node.platform.arch == arm/v7/x', 'not an architecture'],
    ['node.platform.arch == arm/7', 'not an architecture'],
    ['node.platform.variant == v7', 'there is no node.platform.variant'],
    ['node.platform == linux', 'there is no node.platform'],
  ])('refuses %s', (text, why) => {
    const r = parseConstraint(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toContain(why);
  });

  const amd = { id: 'a', name: 'a', labels: {}, platform: { os: 'linux', architecture: 'amd64' }, role: 'manager' as const };
  const armv7 = { id: 'b', name: 'b', labels: {}, platform: { os: 'linux', architecture: 'arm', variant: 'v7' }, role: 'worker' as const };
  const armv6 = { id: 'c', name: 'c', labels: {}, platform: { os: 'linux', architecture: 'arm', variant: 'v6' }, role: 'worker' as const };
  const unknown = { id: 'd', name: 'd', labels: {} };
  it.each([
    ['node.platform.os == linux', [true, true, true, false]],
    ['node.platform.os != linux', [false, false, false, false]],
    ['node.platform.arch == amd64', [true, false, false, false]],
    ['node.platform.arch != amd64', [false, true, true, false]],
    ['node.platform.arch == arm', [false, true, true, false]],
    ['node.platform.arch == armv7l', [false, true, false, false]],
    ['node.platform.arch in (x86_64, arm/v6)', [true, false, true, false]],
    ['node.role == manager', [true, false, false, false]],
    ['node.role != manager', [false, true, true, false]],
    ['node.role in (manager, worker)', [true, true, true, false]],
  ] as const)('%s: amd64 manager, arm/v7 worker, arm/v6 worker, unknown', (text, expected) => {
    expect([amd, armv7, armv6, unknown].map((n) => matchesConstraint(parsed(text), n))).toEqual(expected);
    expect(constraintUnknown(parsed(text), unknown)).toBe(true);
    expect(constraintUnknown(parsed(text), amd)).toBe(false);
  });

  it.each([
    [['node.role == manager', 'node.role == worker'], true],
    [['node.role != manager', 'node.role != worker'], true],
    [['node.role != worker', 'node.role == manager'], false],
    [['node.platform.os == linux', 'node.platform.os == windows'], true],
    [['node.platform.arch == arm', 'node.platform.arch == arm/v7'], false],
  ])('%j contradicts: %s', (texts, expected) => {
    expect(contradiction(texts.map(parsed)) !== null).toBe(expected);
  });
});
