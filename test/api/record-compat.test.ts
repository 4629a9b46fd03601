// Records a member of an older release can read (src/resources/record-compat.ts). On a node whose
// cluster runs at feature level 4 (a member of the release before the mesh, secrets and networks
// still in it), every node and service record the agent, the leader's loops and the API write
// parses with that release's strict schemas (today's, without the fields added since), and what
// only a newer release reads is refused with feature_not_enabled, writing nothing. At level 5
// the same writes carry the new fields. The same at level 5 for what level 6 added (a spec's
// disruption budget, a service's forced disruptions).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { nodesCollection, secretsCollection, servicesCollection } from '../../src/resources/collections.ts';
import { nodeRecordSchema } from '../../src/resources/records.ts';
import { serviceSpecSchema } from '../../src/resources/spec/service-spec.ts';
import { compatCommand } from '../../src/resources/record-compat.ts';
import { jobRunsCollection, jobsCollection } from '../../src/resources/jobs.ts';
import { stacksCollection } from '../../src/resources/stacks.ts';
import { backupStatusCollection, backupTargetsCollection } from '../../src/resources/backup-targets.ts';
import { volumesCollection } from '../../src/resources/volumes.ts';
import { featureLevelContainerSettings, featureLevelDisruptionBudget, featureLevelJobs, featureLevelVips, featureLevelWorkloadNetwork } from '../../src/base/feature-level.ts';
import { serviceRecordSchema } from '../../src/resources/records.ts';
import { controlFeatureLevel } from '../../src/resources/collections.ts';
import { allDocs } from '../../src/resources/state.ts';
import { vipLeasesCollection, vipReleasesCollection, vipsCollection } from '../../src/resources/vips.ts';
import { encodeCommand, type CommandResult } from '../../fsm/index.ts';
import { expectError } from './expect-error.ts';
import { singleNode, type SingleNode } from './single-node.ts';

/** The level-4 release's readers: strict, without the fields added at level 5. */
const olderNodeRecord = nodeRecordSchema.omit({ mesh: true }).strict();
const olderSpec = serviceSpecSchema.omit({ secrets: true, networks: true }).strict();

const vip = { address: '192.168.7.250', subnet: '192.168.7.0/24' };
const nightly = 'apiVersion: shoal/v1\nkind: Job\nname: nightly\nimage: busybox:local\ncommand: ["true"]\nschedule: "0 3 * * *"\n';
const webYaml = 'apiVersion: shoal/v1\nkind: Service\nname: web\nimage: busybox:local\ncommand: ["sleep", "3600"]\nreplicas: 2\n';
const withSecret = 'apiVersion: shoal/v1\nkind: Service\nname: app\nimage: busybox:local\ncommand: ["sleep", "3600"]\nsecrets: [db]\n';

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within 10 s: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('a cluster at feature level 4', () => {
  let s: SingleNode;
  beforeAll(async () => { s = await singleNode({ control: true, featureLevelMax: 4 }); });
  afterAll(async () => { await s.close(); });

  it('writes node and service records the older release parses, through the agent, the loops and the API', async () => {
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: webYaml } });
    expect(applied.statusCode, applied.body).toBe(200);
    await until('the node registered and the loops placed 2 tasks', () => [...allDocs(s.store, nodesCollection)].length === 1 && [...allDocs(s.store, 'shoal.tasks')].length === 2);
    // A change the loops write back (update status) and an operator's change (a node label).
    const drained = await s.app.inject({ method: 'POST', url: '/v1/nodes/solo/labels', payload: { set: { rack: 'a' } } });
    expect(drained.statusCode, drained.body).toBe(200);
    for (const d of allDocs(s.store, nodesCollection)) expect(olderNodeRecord.safeParse(d.doc).error).toBeUndefined();
    const services = [...allDocs(s.store, servicesCollection)];
    expect(services).toHaveLength(1);
    for (const d of services) {
      const spec = (d.doc as { spec: unknown }).spec;
      expect(olderSpec.safeParse(spec).error).toBeUndefined();
      // Today's reader reads it as it was meant: no secrets, no networks.
      expect(serviceSpecSchema.parse(spec)).toMatchObject({ secrets: [], networks: [] });
    }
  });

  it('refuses a secret with feature_not_enabled, and writes nothing', async () => {
    expectError(await s.app.inject({ method: 'PUT', url: '/v1/secrets/db', payload: { valueBase64: Buffer.from('x').toString('base64') } }), 'feature_not_enabled');
    expect(s.store.get(secretsCollection, 'db')).toBeUndefined();
    // A service naming it is refused too (the secret does not exist: it could not be made).
    expect((await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: withSecret } })).statusCode).toBe(400);
    expect(s.store.get(servicesCollection, 'app')).toBeUndefined();
  });
});

describe('a cluster at feature level 5', () => {
  let s: SingleNode;
  beforeAll(async () => { s = await singleNode({ control: true }); });
  afterAll(async () => { await s.close(); });

  it('stores a secret and a service that names it, with its secrets field', async () => {
    const put = await s.app.inject({ method: 'PUT', url: '/v1/secrets/db', payload: { valueBase64: Buffer.from('x').toString('base64') } });
    expect(put.statusCode, put.body).toBe(200);
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: withSecret } });
    expect(applied.statusCode, applied.body).toBe(200);
    const spec = (s.store.get(servicesCollection, 'app')?.doc as { spec: Record<string, unknown> }).spec;
    expect(spec.secrets).toEqual([expect.objectContaining({ name: 'db', target: 'db' })]);
    expect(spec).not.toHaveProperty('networks');
  });
});

/** The level-5 release's readers: strict, without the disruption budget and the forced disruptions. */
const level5Spec = serviceSpecSchema.omit({
  disruption: true, workingDir: true, hostname: true, init: true, readOnlyRootfs: true, shmSizeBytes: true, tmpfs: true, extraHosts: true, dns: true,
  dnsSearch: true, dnsOptions: true, ulimits: true, sysctls: true, labels: true,
  networkAliases: true, networkAddresses: true,
}).strict();
const level5Service = z.object(serviceRecordSchema.shape).omit({ spec: true, previousSpec: true, forcedDisruptions: true }).strict();
const budgeted = `${webYaml.replace('name: web', 'name: budgeted')}disruption: {maxUnavailable: 2}\n`;
const settled = `${webYaml.replace('name: web', 'name: settled')}workingDir: /srv\nlabels: {traefik.enable: 'true'}\n`;

describe('a cluster at feature level 5 (a member of the release before disruption budgets)', () => {
  let s: SingleNode;
  beforeAll(async () => { s = await singleNode({ control: true, featureLevelMax: 5, vips: [vip] }); });
  afterAll(async () => { await s.close(); });

  it('writes service records that release parses, and refuses a budget or a forced disruption with feature_not_enabled', async () => {
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: webYaml } });
    expect(applied.statusCode, applied.body).toBe(200);
    await until('the loops placed 2 tasks', () => [...allDocs(s.store, 'shoal.tasks')].length === 2);
    for (const d of allDocs(s.store, servicesCollection)) {
      const { spec, previousSpec: _p, ...rest } = d.doc as { spec: unknown; previousSpec: unknown };
      expect(level5Spec.safeParse(spec).error).toBeUndefined();
      expect(level5Service.safeParse(rest).error).toBeUndefined();
    }
    expectError(await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: budgeted } }), 'feature_not_enabled');
    expect(s.store.get(servicesCollection, 'budgeted')).toBeUndefined();
    // A forced update writes a forced disruption on the record: refused alike, nothing written.
    expectError(await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: webYaml.replace('busybox:local', 'busybox:v2'), force: true } }), 'feature_not_enabled');
    expect((s.store.get(servicesCollection, 'web')?.doc as { spec: { image: string } }).spec.image).toBe('busybox:local');
    // Container settings (issue 39's Compose fields): level 6 too.
    expectError(await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: settled } }), 'feature_not_enabled');
    expect(s.store.get(servicesCollection, 'settled')).toBeUndefined();
    // A job (issue 42): a member of level 5 has no loop that runs it; refused, nothing written.
    expectError(await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: nightly } }), 'feature_not_enabled');
    expect([...allDocs(s.store, jobsCollection)]).toEqual([]);
  });

  it('gives no node a virtual IP (a member of level 5 would never add it), and refuses a VIP lease with feature_not_enabled', async () => {
    // The loops have run (they placed the tasks above) with a VIP in their config: nothing written.
    await until('the loops placed 2 tasks', () => [...allDocs(s.store, 'shoal.tasks')].length === 2);
    await new Promise((r) => setTimeout(r, 300));
    expect([...allDocs(s.store, vipsCollection)]).toEqual([]);
    // What a holder's agent writes (net/vip-start.ts proposes it through compatCommand).
    const { cmd, featureLevel } = compatCommand({ op: 'put', collection: vipLeasesCollection, id: 'solo', doc: { nodeId: 'solo', epoch: 0, seq: 1, leaseMs: 3_000 } });
    await expect((async () => s.node.propose(encodeCommand({ cmd, ts: Date.now() }), { featureLevel }))()).rejects.toMatchObject({ code: 'feature_not_enabled' });
    expect(s.store.get(vipLeasesCollection, 'solo')).toBeUndefined();
  });
});

describe('a cluster at feature level 6', () => {
  let s: SingleNode;
  beforeAll(async () => { s = await singleNode({ control: true, vips: [vip] }); });
  afterAll(async () => { await s.close(); });

  it('gives its node the virtual IP, and stores its VIP lease', async () => {
    await until('the leader recorded a holder', () => (s.store.get(vipsCollection, vip.address)?.doc as { holder?: unknown } | undefined)?.holder !== undefined);
    expect(s.store.get(vipsCollection, vip.address)?.doc).toMatchObject({ holder: { nodeId: 'solo' } });
    const { cmd, featureLevel } = compatCommand({ op: 'put', collection: vipLeasesCollection, id: 'solo', doc: { nodeId: 'solo', epoch: 0, seq: 1, leaseMs: 3_000 } });
    const { result } = await s.node.propose(encodeCommand({ cmd, ts: Date.now() }), { featureLevel });
    expect((result as CommandResult).ok).toBe(true);
    expect(s.store.get(vipLeasesCollection, 'solo')).toBeDefined();
  });

  it('stores a spec with a disruption budget', async () => {
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: budgeted } });
    expect(applied.statusCode, applied.body).toBe(200);
    expect((s.store.get(servicesCollection, 'budgeted')?.doc as { spec: Record<string, unknown> }).spec.disruption).toEqual({ maxUnavailable: 2, unit: 'slots' });
  });

  it('stores a job', async () => {
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: nightly } });
    expect(applied.statusCode, applied.body).toBe(200);
    expect(s.store.get(jobsCollection, 'nightly')).toBeDefined();
  });

  it('stores a replicated volume\'s spec at apply (docs/volumes.md; the apply gate of the unwired release is gone)', async () => {
    const db = `${webYaml.replace('name: web', 'name: db').replace('replicas: 2', 'replicas: 1')}exclusive: true\nmounts: [{type: volume, source: pgdata, target: /data, replicate: {copies: 2, maxBandwidth: 10Mi}}]\n`;
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: db } });
    expect(applied.statusCode, applied.body).toBe(200);
    expect((s.store.get(servicesCollection, 'db')?.doc as { spec: { mounts: unknown[] } }).spec.mounts[0]).toMatchObject({ replicate: { copies: 2, maxBandwidthBytes: 10 * 1024 ** 2 } });
  });

  it('stores a spec with container settings', async () => {
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: settled } });
    expect(applied.statusCode, applied.body).toBe(200);
    expect((s.store.get(servicesCollection, 'settled')?.doc as { spec: Record<string, unknown> }).spec).toMatchObject({ workingDir: '/srv', labels: { 'traefik.enable': 'true' } });
  });
});

describe('compatCommand', () => {
  it('leaves defaults out and asks level 5 only for what an older member cannot read', () => {
    const node = { id: 'n', mesh: null, state: 'ready' };
    const put = compatCommand({ op: 'put', collection: nodesCollection, id: 'n', doc: node });
    expect(put).toEqual({ cmd: { op: 'put', collection: nodesCollection, id: 'n', doc: { id: 'n', state: 'ready' } }, featureLevel: controlFeatureLevel });
    const meshed = compatCommand({ op: 'txn', compare: [], success: [{ op: 'put', collection: nodesCollection, id: 'n', doc: { ...node, mesh: { publicKey: 'k' } } }], failure: [] });
    expect(meshed.featureLevel).toBe(featureLevelWorkloadNetwork);
    const service = { name: 'a', spec: { name: 'a', secrets: [], networks: ['x'] }, previousSpec: null };
    const svc = compatCommand({ op: 'txn', compare: [], success: [{ op: 'put', collection: servicesCollection, id: 'a', doc: service }], failure: [] });
    expect(svc.cmd.success[0]).toMatchObject({ doc: { spec: { name: 'a', networks: ['x'] } } });
    expect((svc.cmd.success[0] as { doc: { spec: object } }).doc.spec).not.toHaveProperty('secrets');
    expect(svc.featureLevel).toBe(featureLevelWorkloadNetwork);
    expect(compatCommand({ op: 'put', collection: 'shoal.networks', id: 'x', doc: {} }).featureLevel).toBe(featureLevelWorkloadNetwork);
    expect(compatCommand({ op: 'put', collection: 'app', id: 'x', doc: { mesh: null } }).cmd).toMatchObject({ doc: { mesh: null } });
  });

  it('leaves an unwritten budget and no forced disruption out, and asks level 6 for either', () => {
    const record = { name: 'a', spec: { name: 'a', disruption: null, secrets: [] }, previousSpec: { name: 'a', disruption: null }, forcedDisruptions: [] };
    const plain = compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: record });
    expect(plain).toEqual({ cmd: { op: 'put', collection: servicesCollection, id: 'a', doc: { name: 'a', spec: { name: 'a' }, previousSpec: { name: 'a' } } }, featureLevel: controlFeatureLevel });
    const withBudget = compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: { ...record, spec: { name: 'a', disruption: { maxUnavailable: 1, unit: 'slots' }, networks: ['x'] } } });
    expect(withBudget.featureLevel).toBe(featureLevelDisruptionBudget);
    const forced = compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: { ...record, forcedDisruptions: [{ cause: 'drain' }] } });
    expect(forced.featureLevel).toBe(featureLevelDisruptionBudget);
    expect(forced.cmd).toMatchObject({ doc: { forcedDisruptions: [{ cause: 'drain' }] } });
  });

  it('leaves container settings at their defaults out, and asks level 6 for any other value', () => {
    const none = {
      workingDir: null, hostname: null, init: false, readOnlyRootfs: false, shmSizeBytes: null, tmpfs: [], extraHosts: [], dns: [], dnsSearch: [],
      dnsOptions: [], ulimits: [], sysctls: {}, labels: {},
    };
    const plain = compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: { name: 'a', spec: { name: 'a', ...none }, previousSpec: null } });
    expect(plain).toEqual({ cmd: { op: 'put', collection: servicesCollection, id: 'a', doc: { name: 'a', spec: { name: 'a' }, previousSpec: null } }, featureLevel: controlFeatureLevel });
    for (const [k, v] of Object.entries({ workingDir: '/srv', init: true, tmpfs: [{ target: '/t' }], sysctls: { 'net.core.somaxconn': '1' }, labels: { a: 'b' } })) {
      const set = compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: { name: 'a', spec: { name: 'a', ...none, [k]: v }, previousSpec: null } });
      expect(set.featureLevel, k).toBe(featureLevelContainerSettings);
      expect(set.cmd, k).toMatchObject({ doc: { spec: { [k]: v } } });
    }
  });

  it('leaves no network aliases out, and asks level 6 for any', () => {
    const plain = compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: { name: 'a', spec: { name: 'a', networkAliases: {} }, previousSpec: null } });
    expect(plain).toEqual({ cmd: { op: 'put', collection: servicesCollection, id: 'a', doc: { name: 'a', spec: { name: 'a' }, previousSpec: null } }, featureLevel: controlFeatureLevel });
    const set = compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: { name: 'a', spec: { name: 'a', networkAliases: { back: ['db'] } }, previousSpec: null } });
    expect(set.featureLevel).toBe(featureLevelContainerSettings);
    expect(set.cmd).toMatchObject({ doc: { spec: { networkAliases: { back: ['db'] } } } });
  });

  it('asks level 6 for a secret delivered at an absolute path, in a service\'s or a job\'s spec; a file under /run/secrets/ needs no more than secrets do', () => {
    const spec = (target: string) => ({ name: 'a', secrets: [{ name: 'conf', target, mode: 0o444 }] });
    const put = (collection: string, target: string) => compatCommand({ op: 'put', collection, id: 'a', doc: { name: 'a', spec: spec(target), previousSpec: null } });
    // Secrets themselves came with level 5.
    expect(put(servicesCollection, 'app.conf').featureLevel).toBe(featureLevelWorkloadNetwork);
    expect(put(servicesCollection, '/etc/app/app.conf').featureLevel).toBe(featureLevelContainerSettings);
    expect(put(jobsCollection, '/etc/app/app.conf').featureLevel).toBe(featureLevelContainerSettings);
  });

  it('asks level 6 for a secret file owned by a uid or gid (the readers leave 0 out), in a service\'s or a job\'s spec', () => {
    const put = (collection: string, owner: Record<string, number>) => compatCommand({
      op: 'put', collection, id: 'a', doc: { name: 'a', spec: { name: 'a', secrets: [{ name: 'db', target: 'db', mode: 0o400, ...owner }] }, previousSpec: null },
    });
    expect(put(servicesCollection, {}).featureLevel).toBe(featureLevelWorkloadNetwork);
    expect(put(servicesCollection, { uid: 999 }).featureLevel).toBe(featureLevelContainerSettings);
    expect(put(servicesCollection, { gid: 101 }).featureLevel).toBe(featureLevelContainerSettings);
    expect(put(jobsCollection, { uid: 70 }).featureLevel).toBe(featureLevelContainerSettings);
  });

  it('asks level 6 for any write of a VIP, a VIP release or a VIP lease, and none for their delete', () => {
    for (const collection of [vipsCollection, vipReleasesCollection, vipLeasesCollection]) {
      expect(compatCommand({ op: 'put', collection, id: '10.0.0.9', doc: {} }).featureLevel, collection).toBe(featureLevelVips);
      expect(compatCommand({ op: 'delete', collection, id: '10.0.0.9' }).featureLevel).toBe(controlFeatureLevel);
    }
  });

  it('asks level 6 for any write of a job, a job run, a stack, a backup target or status, or a volume record, and none for their delete', () => {
    for (const collection of [jobsCollection, jobRunsCollection, stacksCollection, backupTargetsCollection, backupStatusCollection, volumesCollection]) {
      expect(compatCommand({ op: 'put', collection, id: 'a', doc: { name: 'a' } }).featureLevel).toBe(featureLevelJobs);
      expect(compatCommand({ op: 'delete', collection, id: 'a' }).featureLevel).toBe(controlFeatureLevel);
    }
  });

  it('asks level 6 for a port published on one address of the node', () => {
    const ports = (hostIp?: string) => [{ published: 80, target: 80, protocol: 'tcp', ...(hostIp !== undefined ? { hostIp } : {}) }];
    const put = (p: ReturnType<typeof ports>) => compatCommand({ op: 'put', collection: servicesCollection, id: 'a', doc: { name: 'a', spec: { name: 'a', ports: p }, previousSpec: null } });
    expect(put(ports()).featureLevel).toBe(controlFeatureLevel);
    expect(put(ports('127.0.0.1')).featureLevel).toBe(featureLevelContainerSettings);
  });
});
