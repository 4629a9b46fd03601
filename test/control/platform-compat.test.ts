// Issue 40's record fields are written only where every member reads them: a node's platform and
// a service's image platforms need feature level 6; at their default they are left out.

import { describe, expect, it } from 'vitest';
import { featureLevelSecretsAtRest } from '../../src/base/feature-level.ts';
import { controlFeatureLevel, nodesCollection, registriesCollection, servicesCollection } from '../../src/resources/collections.ts';
import { compatCommand } from '../../src/resources/record-compat.ts';
import { machinePlatform } from '../../src/executor/store-ports.ts';
import { node, spec } from './fixtures.ts';

const put = (collection: string, doc: object) => ({ op: 'put' as const, collection, id: 'x', doc: doc as never });

describe('issue 40 records and feature levels', () => {
  it('a node record with its platform needs level 6; without, the control plane\'s', () => {
    expect(compatCommand(put(nodesCollection, { ...node('n1'), platform: { os: 'linux', architecture: 'amd64' } })).featureLevel).toBe(featureLevelSecretsAtRest);
    expect(compatCommand(put(nodesCollection, { ...node('n1'), mesh: null })).featureLevel).toBe(controlFeatureLevel);
  });

  it('a service record\'s image platforms need level 6, and an empty list is left out', () => {
    const record = {
      name: 'web', spec: spec(), specVersion: 1, previousSpec: null, previousSpecVersion: null,
      updateStatus: { state: 'none', startedAt: null, completedAt: null, message: null }, source: null, createdAt: 1, updatedAt: 1,
    };
    const withPlatforms = compatCommand(put(servicesCollection, { ...record, imagePlatforms: [{ image: 'a@sha256:1', platforms: [{ os: 'linux', architecture: 'amd64' }] }] }));
    expect(withPlatforms.featureLevel).toBe(featureLevelSecretsAtRest);
    const empty = compatCommand(put(servicesCollection, { ...record, imagePlatforms: [] }));
    expect(empty.cmd.op === 'put' ? Object.keys(empty.cmd.doc) : []).not.toContain('imagePlatforms');
  });

  it('a registry login needs level 6', () => {
    expect(compatCommand(put(registriesCollection, { host: 'ghcr.io' })).featureLevel).toBe(featureLevelSecretsAtRest);
  });

  it('names the machine\'s platform as image indexes do', () => {
    expect(machinePlatform('x64', 'linux')).toEqual({ os: 'linux', architecture: 'amd64' });
    expect(machinePlatform('arm64', 'linux')).toEqual({ os: 'linux', architecture: 'arm64', variant: 'v8' });
    expect(machinePlatform('arm', 'linux')).toEqual({ os: 'linux', architecture: 'arm', variant: 'v7' });
    expect(machinePlatform('x64', 'darwin')).toBeUndefined();
  });
});
