import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareNatural, compareText } from '../../src/base/order.ts';

const sign = (n: number): number => (n < 0 ? -1 : n > 0 ? 1 : 0);

describe('compareText', () => {
  it('orders by code unit, not by locale', () => {
    expect(['b', 'B', 'a', 'A_b', 'AB', 'a-b', 'ab'].sort(compareText)).toEqual(['AB', 'A_b', 'B', 'a', 'a-b', 'ab', 'b']);
    expect(compareText('x', 'x')).toBe(0);
  });

  it('agrees with the < operator on any strings', () => {
    fc.assert(fc.property(fc.string(), fc.string(), (a, b) => {
      expect(sign(compareText(a, b))).toBe(a < b ? -1 : a > b ? 1 : 0);
    }));
  });
});

describe('compareNatural', () => {
  it('orders runs of digits by value and the rest by code unit', () => {
    expect(['10', '9', '2', '1'].sort(compareNatural)).toEqual(['1', '2', '9', '10']);
    expect(['n10', 'n2', 'm30', 'n1a', 'n1'].sort(compareNatural)).toEqual(['m30', 'n1', 'n1a', 'n2', 'n10']);
    expect(['10.0.0.10', '10.0.0.9', '9.255.0.1'].sort(compareNatural)).toEqual(['9.255.0.1', '10.0.0.9', '10.0.0.10']);
    expect(['rc.10', 'rc.2', 'beta.1'].sort(compareNatural)).toEqual(['beta.1', 'rc.2', 'rc.10']);
  });

  it('compares digit runs longer than a Number holds exactly', () => {
    expect(compareNatural('x90071992547409931', 'x90071992547409930')).toBe(1);
    expect(compareNatural('x100000000000000000000', 'x99999999999999999999')).toBe(1);
  });

  it('gives equal values written otherwise an order of their own: 0 only for equal strings', () => {
    expect(compareNatural('07', '7')).not.toBe(0);
    expect(sign(compareNatural('07', '7')) + sign(compareNatural('7', '07'))).toBe(0);
    expect(compareNatural('a7', 'a7')).toBe(0);
  });

  const text = fc.stringMatching(/^[a-c0-9.-]{0,8}$/);

  it('is a total order: antisymmetric, transitive, 0 only for equal strings', () => {
    fc.assert(fc.property(text, text, text, (a, b, c) => {
      expect(sign(compareNatural(a, b)) + sign(compareNatural(b, a))).toBe(0);
      expect(compareNatural(a, b) === 0).toBe(a === b);
      if (compareNatural(a, b) <= 0 && compareNatural(b, c) <= 0) expect(compareNatural(a, c)).toBeLessThanOrEqual(0);
    }), { numRuns: 2000 });
  });

  it('orders numbers written without leading zeros as numbers', () => {
    fc.assert(fc.property(fc.nat(), fc.nat(), (x, y) => {
      expect(sign(compareNatural(String(x), String(y)))).toBe(sign(x - y));
      expect(sign(compareNatural(`s${x}`, `s${y}`))).toBe(sign(x - y));
    }));
  });
});
