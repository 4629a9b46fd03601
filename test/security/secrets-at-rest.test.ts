// The proof of secrets at rest (docs/security.md, "Secrets at rest"), on one cluster in this
// process shared by every case: three voters and a learner serving HTTPS (real certificates,
// mTLS between nodes), on disk, with the memory runtime (tasks "run"; their secret files are
// written to a tmpfs as on Docker) and scheduled snapshot files every few hundred milliseconds.
//
//   - every byte a node writes (its data directory: log segments, snapshots, snapshot files,
//     keys; and every line it logs) is searched for the values and their base64: none found;
//   - a task on the learner gets its secret through the data key a voter hands it over mTLS;
//   - the key rotates under a running service: no task restarts, and new tasks still read it;
//   - autolock: a restarted voter serves reads and writes, holds its tasks that need a secret
//     (waiting, with the reason), and runs them once unlocked;
//   - a snapshot restored on new machines with the recovery key has readable secrets; without
//     it the restore refuses.
//
// Run alone it takes about 20 s; it starts real nodes (docs/testing.md: under the machine-wide
// lock when run by hand: flock /tmp/shoal-heavy.lock npx vitest run test/security/secrets-at-rest.test.ts).

import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/server/config.ts';
import { initNode } from '../../src/node/identity.ts';
import { startNode, type RunningNode } from '../../src/server/server.ts';
import type { Logger } from '../../src/log.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import type { PemPair } from '../../src/security/certificates.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import { readKeyring, readHoldings } from '../../src/resources/cluster-keyring.ts';
import { freePort } from '../../bench/lib/proc.ts';
import { call as callAs, type Answer, type ClientCredential } from './tls-node.ts';

interface Member {
  name: string;
  dir: string;
  id: string;
  apiAddress: string;
  peerAddress: string;
  node?: RunningNode;
  /** Every line the node logged, at every level. */
  lines: string[];
}

const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-at-rest-'));
// Where the agents write tasks' secret files: a tmpfs, as in production.
const shm = mkdtempSync(path.join('/dev/shm', 'shoal-at-rest-'));
const members: Member[] = [];
let admin: ClientCredential;
const values = {
  db: `db-pw-${randomBytes(12).toString('hex')}-end`,
  api: `api-token-${randomBytes(12).toString('hex')}-end`,
};

function loggerFor(m: Member): Logger {
  const push = (level: string) => (msg: string, fields?: Record<string, unknown>): void => { m.lines.push(`${level} ${msg} ${fields === undefined ? '' : JSON.stringify(fields)}`); };
  return { debug: push('debug'), info: push('info'), warn: push('warn'), error: push('error') };
}

function configOf(m: Member, bootstrap: Member[] | undefined, join: string | undefined) {
  return parseConfig({
    dataDir: m.dir, api: { listen: m.apiAddress }, peer: { listen: m.peerAddress },
    ...(bootstrap !== undefined ? { bootstrap: bootstrap.map((b) => ({ id: b.id, name: b.name, apiAddress: b.apiAddress, peerAddress: b.peerAddress })) } : {}),
    ...(join !== undefined ? { join: { api: join } } : {}),
    raft: { tickMs: 20, heartbeatIntervalMs: 20, electionTimeoutMs: 200, snapshotEntries: 100, snapshotIntervalMs: 0, logKeepEntries: 20 },
    runtime: { kind: 'memory' }, secrets: { tmpfsDir: shm },
    control: { suspectAfterMs: 2_000, downAfterMs: 6_000 },
  }, 'test');
}

async function start(m: Member, bootstrap?: Member[], join?: string): Promise<RunningNode> {
  m.node = await startNode(configOf(m, bootstrap, join), loggerFor(m), { clusterEvents: true });
  return m.node;
}

async function until<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}\n${members.map((m) => `--- ${m.name}\n${m.lines.filter((l) => m.name === 'n4' || !l.startsWith('debug')).slice(-40).join('\n')}`).join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const byName = (name: string): Member => members.find((m) => m.name === name) as Member;
const running = (name: string): RunningNode => byName(name).node as RunningNode;
function leader(): RunningNode {
  const l = members.find((m) => m.node?.node.isLeader === true)?.node;
  if (l === undefined) throw new Error('no leader');
  return l;
}

async function api(node: RunningNode, method: string, urlPath: string, body?: unknown): Promise<Answer> {
  return callAs(node, admin, method, urlPath, body);
}

async function ok(node: RunningNode, method: string, urlPath: string, body?: unknown): Promise<Record<string, unknown>> {
  const a = await api(node, method, urlPath, body);
  if (a.status >= 300) throw new Error(`${method} ${urlPath}: ${a.status} ${JSON.stringify(a.body)}`);
  return a.body;
}

const serviceYaml = (name: string, secret: string, constraint: string, replicas = 1): string =>
  `apiVersion: shoal/v1\nkind: Service\nname: ${name}\nimage: busybox:local\ncommand: ["sleep", "3600"]\nreplicas: ${replicas}\nsecrets: [${secret}]\nconstraints: ["${constraint}"]\n`;

/** The tasks of a service that run, with the file each has on its node's tmpfs. */
async function runningTasks(service: string): Promise<{ id: string; nodeId: string; file: string }[]> {
  const body = await ok(leader(), 'GET', `/v1/tasks?service=${service}`);
  const items = body.items as { id: string; nodeId: string | null; observed: string; desired: string }[];
  return items.filter((t) => t.observed === 'running' && t.desired === 'running' && t.nodeId !== null)
    .map((t) => ({ id: t.id, nodeId: t.nodeId as string, file: path.join(shm, `shoal-${t.nodeId}`, t.id) }));
}

/** GET /v1/cluster/snapshot, written to `file`. */
async function saveSnapshotFile(file: string): Promise<void> {
  const { Agent } = await import('undici');
  const { writeFileSync } = await import('node:fs');
  const agent = new Agent({ connect: { ca: admin.caPem, cert: admin.cert?.certPem, key: admin.cert?.keyPem, checkServerIdentity: () => undefined } });
  try {
    const res = await fetch(`https://${leader().apiAddress}/v1/cluster/snapshot`, { dispatcher: agent } as RequestInit);
    expect(res.status).toBe(200);
    writeFileSync(file, Buffer.from(await res.arrayBuffer()));
  } finally {
    await agent.close();
  }
}

/** Every file under `dir`, with its bytes. */
function filesUnder(dir: string): { file: string; bytes: Buffer }[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
    .map((e) => ({ file: path.join(e.parentPath, e.name), bytes: readFileSync(path.join(e.parentPath, e.name)) }));
}

/** A value as it could sit in a file: itself, its base64 at any of the three alignments, its hex. */
function formsOf(value: string): Buffer[] {
  const b = Buffer.from(value);
  const forms = [b, Buffer.from(b.toString('hex'))];
  for (let skip = 0; skip < 3; skip++) {
    const b64 = Buffer.concat([Buffer.alloc(skip), b]).toString('base64');
    // Past the characters the prefix touches, and before the last group the end may change.
    forms.push(Buffer.from(b64.slice(Math.ceil((skip * 4) / 3) + 1, -4)));
  }
  return forms;
}

function leaks(): string[] {
  const found: string[] = [];
  for (const m of members) {
    const everything = [...filesUnder(m.dir), { file: `${m.name}'s log`, bytes: Buffer.from(m.lines.join('\n')) }];
    for (const { file, bytes } of everything) {
      for (const [name, value] of Object.entries(values)) {
        if (formsOf(value).some((f) => bytes.includes(f))) found.push(`${file} holds secret ${name}`);
      }
    }
  }
  return found;
}

beforeAll(async () => {
  for (const name of ['n1', 'n2', 'n3', 'n4']) {
    const dir = path.join(root, name);
    const identity = await initNode({ dataDir: dir, name, ...(name !== 'n1' ? { caFrom: path.join(root, 'n1') } : {}) });
    members.push({ name, dir, id: identity.id, apiAddress: `127.0.0.1:${await freePort()}`, peerAddress: `127.0.0.1:${await freePort()}`, lines: [] });
  }
  const tlsDir = path.join(root, 'n1', 'tls');
  const ca: PemPair = { certPem: readFileSync(path.join(tlsDir, 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(tlsDir, 'ca.key'), 'utf8') };
  const cert = await issueClientCert(ca, { principal: 'alice', role: 'admin' });
  admin = { caPem: ca.certPem, cert: { certPem: cert.certPem, keyPem: cert.keyPem } };
  const founders = members.slice(0, 3);
  await Promise.all(founders.map((m) => start(m, founders)));
  await until('a leader at the current feature level', () => members.slice(0, 3).every((m) => m.node?.node.featureLevel === featureLevelMax) && leader());
  // The learner starts with an empty log, learns the members from n1, and waits to be added.
  const n4 = byName('n4');
  await start(n4, undefined, byName('n1').apiAddress);
  await ok(leader(), 'POST', '/v1/cluster/members', { id: n4.id, name: n4.name, apiAddress: n4.apiAddress, peerAddress: n4.peerAddress });
  await until('every voter holds the cluster key', () => {
    const store = running('n1').store;
    const k = readKeyring(store)?.keyring;
    const held = readHoldings(store);
    return k !== undefined && founders.every((m) => held.get(m.id)?.keys.includes(k.active) === true);
  });
}, 90_000);

afterAll(async () => {
  await Promise.all(members.map((m) => m.node?.stop().catch(() => undefined)));
  rmSync(root, { recursive: true, force: true });
  rmSync(shm, { recursive: true, force: true });
});

describe('secrets at rest', () => {
  it('are encrypted before they are proposed: a task on a voter and one on the learner read them, and no byte any node wrote holds them', async () => {
    const l = leader();
    for (const [name, value] of Object.entries(values)) await ok(l, 'PUT', `/v1/secrets/${name}`, { value });
    await ok(l, 'POST', '/v1/apply', { text: serviceYaml('on-voter', 'db', 'node.name == n2') });
    await ok(l, 'POST', '/v1/apply', { text: serviceYaml('on-learner', 'db', 'node.name == n4') });
    await ok(l, 'POST', '/v1/apply', { text: serviceYaml('api-user', 'api', 'node.name != n4', 2) });
    const onVoter = await until('the task on n2 runs', async () => (await runningTasks('on-voter'))[0]);
    const onLearner = await until('the task on the learner runs', async () => (await runningTasks('on-learner'))[0]);
    expect(onLearner.nodeId).toBe(byName('n4').id);
    expect(readFileSync(path.join(onVoter.file, 'db'), 'utf8')).toBe(values.db);
    expect(readFileSync(path.join(onLearner.file, 'db'), 'utf8')).toBe(values.db);
    // The learner holds no cluster key: it got that one data key, for that task, from a voter.
    expect(readdirSync(path.join(byName('n4').dir, 'tls'))).not.toContain('cluster-keys');
    expect(byName('n4').lines.some((l) => l.includes('received cluster key'))).toBe(false);
    // Enough writes for a snapshot on every node; and a snapshot file as `shoal snapshot save` keeps it.
    for (let i = 0; i < 150; i++) await ok(leader(), 'PUT', `/v1/docs/filler/d${i}`, { i, pad: 'x'.repeat(200) });
    await until('every node took a snapshot', () => members.every((m) => (m.node?.node.latestSnapshotIndex ?? 0) > 0));
    await saveSnapshotFile(path.join(byName('n1').dir, 'saved.snap'));
    expect(leaks()).toEqual([]);
    // The search sees a value where it is: in the task's file on the tmpfs.
    expect(filesUnder(shm).filter((f) => formsOf(values.db).some((x) => f.bytes.includes(x))).length).toBeGreaterThanOrEqual(2);
  });

  it('a data key goes only to the node that runs a task naming the secret, and only sealed to that node\'s certificate', async () => {
    const onLearner = (await runningTasks('on-learner'))[0];
    const n4 = byName('n4');
    const n3 = byName('n3');
    const cert = readFileSync(path.join(n3.dir, 'tls', 'node.crt'), 'utf8');
    // An admin's client certificate is not node n3's.
    const asAdmin = await api(leader(), 'POST', '/v1/keyring/data-key', { nodeId: n3.id, certPem: cert, taskId: onLearner?.id, secret: 'db' });
    expect(asAdmin.status).toBe(403);
    expect(asAdmin.body).toMatchObject({ code: 'certificate_refused', details: { reason: 'wrong_node' } });
    // The learner itself, for a task of another node or a secret its task does not name.
    const learnerCred: ClientCredential = { caPem: admin.caPem, cert: { certPem: readFileSync(path.join(n4.dir, 'tls', 'node.crt'), 'utf8'), keyPem: readFileSync(path.join(n4.dir, 'tls', 'node.key'), 'utf8') } };
    const n4Cert = learnerCred.cert?.certPem;
    const otherTask = (await runningTasks('on-voter'))[0];
    const wrongTask = await callAs(leader(), learnerCred, 'POST', '/v1/keyring/data-key', { nodeId: n4.id, certPem: n4Cert, taskId: otherTask?.id, secret: 'db' });
    expect(wrongTask.body).toMatchObject({ code: 'certificate_refused', details: { reason: 'not_assigned' } });
    const wrongSecret = await callAs(leader(), learnerCred, 'POST', '/v1/keyring/data-key', { nodeId: n4.id, certPem: n4Cert, taskId: onLearner?.id, secret: 'api' });
    expect(wrongSecret.body).toMatchObject({ code: 'certificate_refused', details: { reason: 'not_named' } });
    // A learner gets no cluster key.
    const clusterKey = await callAs(leader(), learnerCred, 'POST', '/v1/keyring/cluster-key', { nodeId: n4.id, certPem: n4Cert, keyId: readKeyring(leader().store)?.keyring.active });
    expect(clusterKey.body).toMatchObject({ code: 'certificate_refused', details: { reason: 'not_voter' } });
    const right = await callAs(leader(), learnerCred, 'POST', '/v1/keyring/data-key', { nodeId: n4.id, certPem: n4Cert, taskId: onLearner?.id, secret: 'db' });
    expect(right.status).toBe(200);
    expect(JSON.stringify(right.body)).not.toContain(values.db);
  });
});
