import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { parseSpecObjects, parseSpecs, renderService, serviceSpecSchema } from '../../../src/resources/spec/index.ts';
import { serviceSpecArb } from './arbitrary-spec.ts';

describe('renderService', () => {
  it('writes a spec that reads back as the same spec', () => {
    fc.assert(fc.property(serviceSpecArb, (spec) => {
      expect(serviceSpecSchema.safeParse(spec).success).toBe(true);
      expect(parseSpecObjects([renderService(spec)]).services).toEqual([spec]);
    }), { numRuns: 300 });
  });

  it('writes YAML that reads back as the same spec', () => {
    fc.assert(fc.property(fc.array(serviceSpecArb, { minLength: 1, maxLength: 3 }), (specs) => {
      const named = specs.map((s, i) => ({ ...s, name: `${s.name}-${i}` }));
      const text = named.map((s) => stringify(renderService(s))).join('---\n');
      expect(parseSpecs(text).services).toEqual(named);
    }), { numRuns: 100 });
  });
});
