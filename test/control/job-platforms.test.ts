// Issue 40: a job's runs are placed as a service's tasks are, only on nodes whose platform the
// job's pinned image offers (the job record's imagePlatforms, written by apply), with the same
// pending reason; and the record needs the level of the release that reads the field.

import { describe, expect, it } from 'vitest';
import { placePending } from '../../src/control/placement.ts';
import { withImagePlatforms, type ImageResolution } from '../../src/api/image-resolution.ts';
import { featureLevelJobs, featureLevelSecretsAtRest } from '../../src/base/feature-level.ts';
import { putChange } from '../../src/resources/changes.ts';
import { controlFeatureLevel } from '../../src/resources/collections.ts';
import { jobsCollection, newJob, type JobRecord } from '../../src/resources/jobs.ts';
import { compatCommand } from '../../src/resources/record-compat.ts';
import type { TaskRecord } from '../../src/resources/records.ts';
import type { ControlState } from '../../src/resources/state.ts';
import { jobSpecOf } from './job-model.ts';
import { StateBuilder } from './state-builder.ts';

const amd64 = { os: 'linux', architecture: 'amd64' };
const arm64 = { os: 'linux', architecture: 'arm64', variant: 'v8' };
const image = `reg.lan/team/backup:1@sha256:${'5'.repeat(64)}`;

function jobRecord(platforms: { os: string; architecture: string; variant?: string }[] | null): JobRecord {
  const job = newJob(jobSpecOf(`apiVersion: shoal/v1\nkind: Job\nname: backup\nimage: ${image}\nschedule: "0 3 * * *"\n`), 0, null);
  return platforms === null ? job : { ...job, imagePlatforms: [{ image, platforms }] };
}

/** Two arm64 nodes and one amd64 node, and one pending attempt of a run of the job. */
function stateWith(job: JobRecord): ControlState {
  const b = new StateBuilder().node('n1', { platform: amd64 }).node('n2', { platform: arm64 }).node('n3', { platform: arm64 })
    .task({ id: 'run-1', service: 'backup', slot: 'backup-20261206t030000z' });
  return { ...b.build(), jobs: new Map([['backup', { value: job, rev: 1 }]]) };
}

function placedAs(state: ControlState): [string | null | undefined, string | null | undefined] {
  const t = placePending(state, 1, 5).plan.changes.map((c) => (c.kind === 'put' ? c.doc as unknown as TaskRecord : undefined))[0];
  return [t?.nodeId, t?.pendingReason];
}

describe('a job\'s image platforms', () => {
  it('places a run only on a node of a platform the image offers', () => {
    expect(placedAs(stateWith(jobRecord([arm64])))[0]).toMatch(/^n[23]$/);
    expect(placedAs(stateWith(jobRecord([amd64])))[0]).toBe('n1');
  });

  it('leaves a run pending with the reason when no node has a platform the image offers', () => {
    const [nodeId, reason] = placedAs(stateWith(jobRecord([{ os: 'linux', architecture: 's390x' }])));
    expect(nodeId).toBeNull();
    expect(reason).toBe('1 node linux/amd64 (the image offers linux/s390x only) (n1); 2 nodes linux/arm64/v8 (the image offers linux/s390x only) (n2, n3)');
  });

  it('does not check a job whose image platforms are not known', () => {
    expect(placedAs(stateWith(jobRecord(null)))[0]).toMatch(/^n[123]$/);
  });

  it('apply writes what the pinned image offers into the job record, and keeps it while the image is the same', () => {
    const empty = new StateBuilder().build();
    const put = putChange(jobsCollection, 'backup', jobRecord(null), null);
    const resolved: ImageResolution[] = [{ job: 'backup', requested: 'reg.lan/team/backup:1', image, outcome: 'resolved', digest: `sha256:${'5'.repeat(64)}`, platforms: [arm64] }];
    const written = withImagePlatforms(put, empty, resolved);
    expect(written.kind === 'put' ? (written.doc as unknown as JobRecord).imagePlatforms : undefined).toEqual([{ image, platforms: [arm64] }]);
    // Written again with the pin kept (no resolution now): the platforms read before stay.
    const kept = withImagePlatforms(put, stateWith(jobRecord([arm64])), []);
    expect(kept.kind === 'put' ? (kept.doc as unknown as JobRecord).imagePlatforms : undefined).toEqual([{ image, platforms: [arm64] }]);
    // Another image: the old image's platforms do not carry over.
    const other = { ...jobRecord(null), spec: { ...jobRecord(null).spec, image: 'reg.lan/team/backup:2' } };
    const moved = withImagePlatforms(putChange(jobsCollection, 'backup', other, 1), stateWith(jobRecord([arm64])), []);
    expect(moved.kind === 'put' ? (moved.doc as unknown as JobRecord).imagePlatforms : 'x').toBeUndefined();
  });

  it('a job record with image platforms needs the level of the release that reads them (as every job write does)', () => {
    const put = (doc: JobRecord) => ({ op: 'put' as const, collection: jobsCollection, id: 'backup', doc: doc as unknown as Record<string, never> });
    expect(compatCommand(put(jobRecord([arm64]))).featureLevel).toBe(featureLevelSecretsAtRest);
    expect(compatCommand(put(jobRecord(null))).featureLevel).toBe(featureLevelJobs);
    expect(featureLevelJobs).toBeGreaterThan(controlFeatureLevel);
  });
});
