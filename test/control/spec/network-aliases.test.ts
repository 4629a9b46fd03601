// A Service's network aliases (src/resources/spec/network-aliases.ts): read sorted, refused with
// their path when a name is not a DNS label, given twice, the service's own name, or on a network
// the service is not on; a change of aliases keeps the tasks running.

import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../../src/errors.ts';
import { parseSpecObjects, renderService, specChange, type Problem, type ServiceSpec } from '../../../src/resources/spec/index.ts';

const svc = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image: 'busybox:local', ...fields });

function one(fields: Record<string, unknown>): ServiceSpec {
  const s = parseSpecObjects([svc(fields)]).services[0];
  if (s === undefined) throw new Error('none');
  return s;
}

function refused(fields: Record<string, unknown>): string[] {
  try {
    parseSpecObjects([svc(fields)]);
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    expect((err as ShoalError).code).toBe('bad_request');
    return (((err as ShoalError).details?.problems ?? []) as Problem[]).map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error('the input was accepted');
}

describe('network aliases', () => {
  it('reads aliases per network, sorted, and none by default', () => {
    expect(one({}).networkAliases).toEqual({});
    const s = one({ networks: ['front', 'back'], networkAliases: { front: ['www', 'app'], back: [] } });
    expect(s.networkAliases).toEqual({ back: [], front: ['app', 'www'] });
    // Rendered back, it reads as the same spec.
    expect(one(renderService(s)).networkAliases).toEqual(s.networkAliases);
  });

  it('refuses a name that is not a DNS label, one given twice, the service\'s own name, and a network the service is not on', () => {
    expect(refused({ networks: ['front'], networkAliases: { front: ['Web_1'] } })).toEqual([expect.stringMatching(/^services\[0\]\.networkAliases\.front\[0\]: .*DNS label/)]);
    expect(refused({ networks: ['front'], networkAliases: { front: ['a', 'b', 'a'] } })).toEqual(['services[0].networkAliases.front[2]: a is already given by [0]']);
    expect(refused({ networks: ['front'], networkAliases: { front: ['web'] } })).toEqual([expect.stringMatching(/^services\[0\]\.networkAliases\.front\[0\]: web is the service's own name/)]);
    expect(refused({ networks: ['front'], networkAliases: { back: ['db'] } })).toEqual([expect.stringMatching(/^services\[0\]\.networkAliases\.back: the service is not on the network back/)]);
    expect(refused({ networkAliases: ['db'] })).toEqual([expect.stringMatching(/^services\[0\]\.networkAliases: must be a mapping/)]);
    expect(refused({ networks: ['front'], networkAliases: { front: 'db' } })).toEqual([expect.stringMatching(/^services\[0\]\.networkAliases\.front: must be a list/)]);
  });

  it('keeps the tasks running when only the aliases change (the resolver reads them as it answers)', () => {
    const before = one({ networks: ['front'] });
    const after = one({ networks: ['front'], networkAliases: { front: ['www'] } });
    expect(specChange(before, after)).toBe('scale');
  });
});
