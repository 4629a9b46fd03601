// A named volume's options (MountSpec.volumeOptions, issue 39's compose driver_opts): read for
// services and jobs, refused with their path when not the local driver's, on a bind mount, type
// without device, or two mounts of one volume that disagree; stored with the schema's default
// (absent), rendered back, a change of options replaces the tasks, and a record with them needs
// feature level 6. The node's side (create the volume, refuse one made otherwise) is in
// test/executor/volume-options.test.ts and test/executor/docker-volumes.test.ts.

import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../../src/errors.ts';
import { parseSpecObjects, renderService, specChange, type Problem, type ServiceSpec } from '../../../src/resources/spec/index.ts';
import { serviceSpecSchema } from '../../../src/resources/spec/service-spec.ts';
import { compatCommand } from '../../../src/resources/record-compat.ts';
import { servicesCollection, controlFeatureLevel } from '../../../src/resources/collections.ts';
import { jobsCollection } from '../../../src/resources/jobs.ts';
import { featureLevelContainerSettings } from '../../../src/base/feature-level.ts';
import type { JsonObject } from '../../../fsm/types.ts';

const nfs = { type: 'nfs', o: 'addr=10.0.0.5,rw', device: ':/export' };
const svc = (fields: Record<string, unknown>): Record<string, unknown> => ({ apiVersion: 'shoal/v1', kind: 'Service', name: 'web', image: 'busybox:local', ...fields });

function one(fields: Record<string, unknown>): ServiceSpec {
  const s = parseSpecObjects([svc(fields)]).services[0];
  if (s === undefined) throw new Error('none');
  return s;
}

function refused(doc: Record<string, unknown>): string[] {
  try {
    parseSpecObjects([doc]);
  } catch (err) {
    expect(err).toBeInstanceOf(ShoalError);
    expect((err as ShoalError).code).toBe('bad_request');
    return (((err as ShoalError).details?.problems ?? []) as Problem[]).map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error('the input was accepted');
}

describe('a named volume\'s options', () => {
  it('reads them on a volume mount, keys sorted, and leaves them out when not given', () => {
    const s = one({ mounts: [{ type: 'volume', source: 'media', target: '/media', volumeOptions: { type: 'nfs', device: ':/export', o: 'addr=10.0.0.5,rw' } }, { type: 'volume', source: 'plain', target: '/p' }] });
    expect(s.mounts).toEqual([
      { type: 'volume', source: 'media', target: '/media', readOnly: false, volumeOptions: nfs },
      { type: 'volume', source: 'plain', target: '/p', readOnly: false },
    ]);
    expect(Object.keys(s.mounts[0]?.volumeOptions ?? {})).toEqual(['device', 'o', 'type']);
    expect(s.mounts[1]).not.toHaveProperty('volumeOptions');
    // Stored, it reads back the same; rendered, it reads as the same spec.
    expect(serviceSpecSchema.parse(JSON.parse(JSON.stringify(s)))).toEqual(s);
    expect(one(renderService(s)).mounts).toEqual(s.mounts);
    // A record written before the field exists reads as no options.
    expect(serviceSpecSchema.parse({ ...JSON.parse(JSON.stringify(s)), mounts: [{ type: 'volume', source: 'media', target: '/media', readOnly: false }] }).mounts[0]).not.toHaveProperty('volumeOptions');
  });

  it('takes a job\'s volume options too', () => {
    const j = parseSpecObjects([{ apiVersion: 'shoal/v1', kind: 'Job', name: 'backup', image: 'busybox:local', command: ['true'], mounts: [{ type: 'volume', source: 'media', target: '/media', volumeOptions: nfs }] }]).jobs[0];
    expect(j?.mounts).toEqual([{ type: 'volume', source: 'media', target: '/media', readOnly: false, volumeOptions: nfs }]);
  });

  it('refuses, with their paths: keys the local driver lacks, values not strings, type without device, empty, on a bind, disagreeing mounts of one volume', () => {
    const mount = (volumeOptions: unknown, more: Record<string, unknown> = {}) => ({ mounts: [{ type: 'volume', source: 'media', target: '/media', volumeOptions, ...more }] });
    expect(refused(svc(mount({ ...nfs, opts: 'x' })))).toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.volumeOptions\.opts: is not an option of Docker's local volume driver, which takes type, device, o, size/)]);
    expect(refused(svc(mount({ ...nfs, o: 5 })))).toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.volumeOptions\.o: must be a string/)]);
    expect(refused(svc(mount({ type: 'nfs', o: 'addr=1' })))).toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.volumeOptions: gives type without device/)]);
    expect(refused(svc(mount({ device: ':/x' })))).toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.volumeOptions: gives device without type/)]);
    expect(refused(svc(mount({})))).toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.volumeOptions: is empty/)]);
    expect(refused(svc(mount('type=nfs')))).toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.volumeOptions: must be a mapping/)]);
    expect(refused(svc({ mounts: [{ type: 'bind', source: '/srv', target: '/srv', volumeOptions: nfs }] })))
      .toEqual([expect.stringMatching(/^services\[0\]\.mounts\[0\]\.volumeOptions: a bind mount takes no volume options/)]);
    expect(refused(svc({ mounts: [{ type: 'volume', source: 'media', target: '/a', volumeOptions: nfs }, { type: 'volume', source: 'media', target: '/b' }] })))
      .toEqual([expect.stringMatching(/^services\[0\]\.mounts\[1\]\.volumeOptions: the volume media is mounted by \[0\] with other options/)]);
    expect(refused({ apiVersion: 'shoal/v1', kind: 'Job', name: 'j', image: 'busybox:local', command: ['true'], mounts: [{ type: 'volume', source: 'v', target: '/a', volumeOptions: { size: '1' } }, { type: 'volume', source: 'v', target: '/b', volumeOptions: { size: '2' } }] }))
      .toEqual([expect.stringMatching(/^jobs\[0\]\.mounts\[1\]\.volumeOptions: the volume v is mounted by \[0\] with other options/)]);
  });

  it('is a change that replaces the tasks (the volume is made when a container is created)', () => {
    const plain = one({ mounts: [{ type: 'volume', source: 'media', target: '/media' }] });
    const withNfs = one({ mounts: [{ type: 'volume', source: 'media', target: '/media', volumeOptions: nfs }] });
    const otherNfs = one({ mounts: [{ type: 'volume', source: 'media', target: '/media', volumeOptions: { ...nfs, o: 'addr=10.0.0.6,rw' } }] });
    expect(specChange(plain, withNfs)).toBe('replace');
    expect(specChange(withNfs, otherNfs)).toBe('replace');
    expect(specChange(withNfs, one({ mounts: [{ type: 'volume', source: 'media', target: '/media', volumeOptions: { device: ':/export', o: 'addr=10.0.0.5,rw', type: 'nfs' } }] }))).toBe('none');
  });

  it('asks feature level 6 of a service or a job that gives any, and nothing more of one that does not', () => {
    const record = (mounts: JsonObject[]) => ({ name: 'a', spec: { name: 'a', mounts }, previousSpec: null });
    const plain = compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: record([{ type: 'volume', source: 'v', target: '/v', readOnly: false }]) });
    expect(plain.featureLevel).toBe(controlFeatureLevel);
    const set = compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: record([{ type: 'volume', source: 'v', target: '/v', readOnly: false, volumeOptions: nfs }]) });
    expect(set.featureLevel).toBe(featureLevelContainerSettings);
    expect(set.cmd).toMatchObject({ doc: { spec: { mounts: [{ volumeOptions: nfs }] } } });
    const job = compatCommand({ op: 'put', collection: jobsCollection, id: 'j', doc: { name: 'j', spec: { name: 'j', mounts: [{ type: 'volume', source: 'v', target: '/v', readOnly: false, volumeOptions: nfs }] } } });
    expect(job.featureLevel).toBe(featureLevelContainerSettings);
  });
});
