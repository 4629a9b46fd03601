import { describe, expect, it } from 'vitest';
import { contradiction, matchesConstraint, parseConstraint, type Constraint } from '../../../src/resources/spec/constraint.ts';

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
