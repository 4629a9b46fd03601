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
import { inProcess } from '../cli/in-process.ts';
import { loadIdentity } from '../../src/node/identity.ts';
import { existsSync, writeFileSync } from 'node:fs';
import { registrySecretName } from '../../src/resources/registry-logins.ts';

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
/** An admin credential file for the CLI (it pins the CA and holds the client certificate). */
let credentialFile = '';
const values = {
  db: `db-pw-${randomBytes(12).toString('hex')}-end`,
  api: `api-token-${randomBytes(12).toString('hex')}-end`,
};

function loggerFor(m: Member): Logger {
  const push = (level: string) => (msg: string, fields?: Record<string, unknown>): void => { m.lines.push(`${level} ${msg} ${fields === undefined ? '' : JSON.stringify(fields)}`); };
  return { debug: push('debug'), info: push('info'), warn: push('warn'), error: push('error') };
}

function configOf(m: Member, bootstrap: Member[] | undefined, join: string | undefined, peerUnlock = false) {
  return parseConfig({
    dataDir: m.dir, api: { listen: m.apiAddress }, peer: { listen: m.peerAddress },
    ...(bootstrap !== undefined ? { bootstrap: bootstrap.map((b) => ({ id: b.id, name: b.name, apiAddress: b.apiAddress, peerAddress: b.peerAddress })) } : {}),
    ...(join !== undefined ? { join: { api: join } } : {}),
    raft: { tickMs: 20, heartbeatIntervalMs: 20, electionTimeoutMs: 200, snapshotEntries: 100, snapshotIntervalMs: 0, logKeepEntries: 20 },
    runtime: { kind: 'memory' }, secrets: { tmpfsDir: shm, peerUnlock },
    control: { suspectAfterMs: 2_000, downAfterMs: 6_000 },
  }, 'test');
}

async function start(m: Member, bootstrap?: Member[], join?: string, peerUnlock = false): Promise<RunningNode> {
  m.node = await startNode(configOf(m, bootstrap, join, peerUnlock), loggerFor(m), { clusterEvents: true });
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

/** The unlock and recovery keys the tests were shown: never written by a node either. */
const keysShown: Record<string, string> = {};

function leaks(): string[] {
  const found: string[] = [];
  for (const m of members) {
    const everything = [...filesUnder(m.dir), { file: `${m.name}'s log`, bytes: Buffer.from(m.lines.join('\n')) }];
    for (const { file, bytes } of everything) {
      for (const [name, value] of [...Object.entries(values), ...Object.entries(keysShown)]) {
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
  credentialFile = path.join(root, 'admin.json');
  const founders = members.slice(0, 3);
  await Promise.all(founders.map((m) => start(m, founders)));
  await until('a leader at the current feature level', () => members.slice(0, 3).every((m) => m.node?.node.featureLevel === featureLevelMax) && leader());
  // The learner starts with an empty log, learns the members from n1, and waits to be added.
  const n4 = byName('n4');
  await start(n4, undefined, byName('n1').apiAddress);
  writeFileSync(credentialFile, JSON.stringify({
    version: 1, clusterId: loadIdentity(byName('n1').dir).clusterId, ca: ca.certPem, addresses: members.slice(0, 3).map((m) => m.apiAddress),
    principal: 'alice', role: 'admin', cert: cert.certPem, key: cert.keyPem,
  }), { mode: 0o600 });
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

  it('rotates the key under a running service: no task restarts, every data key is re-wrapped, new tasks read the secret, the old key is gone', async () => {
    const before = await runningTasks('api-user');
    expect(before).toHaveLength(2);
    const old = readKeyring(leader().store)?.keyring.active as string;
    const r = await inProcess('secret', 'rotate-key', '--json', '--timeout', '60s', '--addr', leader().apiAddress, '--credential', credentialFile);
    expect(r.code, r.stderr).toBe(0);
    const k = (JSON.parse(r.stdout) as { keyring: { active: string; rotation: unknown; secrets: Record<string, number> } }).keyring;
    expect(k.active).not.toBe(old);
    expect(k.rotation).toBeNull();
    expect(k.secrets).toEqual({ [k.active]: 2 });
    expect(r.stderr).toMatch(/^rotation [0-9a-f]{16} started: key [0-9a-f]{16} -> [0-9a-f]{16}$/m);
    expect(r.stderr).toMatch(/^done: every data key is wrapped by /m);
    // The same tasks, still running; and a new one reads the value through the new key.
    expect((await runningTasks('api-user')).map((t) => t.id).sort()).toEqual(before.map((t) => t.id).sort());
    await ok(leader(), 'POST', '/v1/services/api-user/scale', { replicas: 3 });
    const added = await until('a third task runs', async () => (await runningTasks('api-user')).find((t) => !before.some((b) => b.id === t.id)));
    await until('its file is written', () => existsSync(path.join(added.file, 'api')) && readFileSync(path.join(added.file, 'api'), 'utf8') !== '');
    expect(readFileSync(path.join(added.file, 'api'), 'utf8')).toBe(values.api);
    // The learner's next task too: a data key from a voter, which unwraps it with the new key.
    const onLearner = await runningTasks('on-learner');
    await ok(leader(), 'POST', '/v1/services/on-learner/scale', { replicas: 2 });
    const next = await until('a second task runs on the learner', async () => (await runningTasks('on-learner')).find((t) => !onLearner.some((b) => b.id === t.id)));
    await until('its file is written', () => existsSync(path.join(next.file, 'db')) && readFileSync(path.join(next.file, 'db'), 'utf8') !== '');
    expect(readFileSync(path.join(next.file, 'db'), 'utf8')).toBe(values.db);
    await until('the old key is deleted from every voter', () => members.slice(0, 3).every((m) => !existsSync(path.join(m.dir, 'tls', 'cluster-keys', `${old}.key`))));
    expect(leaks()).toEqual([]);
  });

  // Issue 40: a registry login's password is a secret too.
  it('a job\'s attempt on the learner gets the secret its job names, through a voter', async () => {
    // A job's attempt is a task named after the job: the voter finds the spec in the job's record.
    await ok(leader(), 'POST', '/v1/apply', { text: 'apiVersion: shoal/v1\nkind: Job\nname: chore-on-learner\nimage: busybox:local\ncommand: ["sleep", "3600"]\nsecrets: [db]\nconstraints: ["node.name == n4"]\n' });
    await ok(leader(), 'POST', '/v1/jobs/chore-on-learner/run', {});
    const attempt = await until('the job\'s attempt runs on the learner', async () => (await runningTasks('chore-on-learner'))[0]);
    expect(attempt.nodeId).toBe(byName('n4').id);
    expect(readFileSync(path.join(attempt.file, 'db'), 'utf8')).toBe(values.db);
    await ok(leader(), 'DELETE', '/v1/jobs/chore-on-learner');
  });

  it('a registry login\'s password reaches the learner that pulls for its task, through a voter, and no other task or file', async () => {
    const password = `registry-pw-${randomBytes(12).toString('hex')}-end`;
    keysShown.registry = password;
    await ok(leader(), 'PUT', '/v1/registries/registry.lan:5000', { username: 'ci', password });
    await ok(leader(), 'POST', '/v1/apply', { text: 'apiVersion: shoal/v1\nkind: Service\nname: private-on-learner\nimage: registry.lan:5000/team/app:1\ncommand: ["sleep", "3600"]\nconstraints: ["node.name == n4"]\n' });
    // The agent reads the password before it pulls: a task that runs got it (it would wait, starting, if not).
    const task = await until('the task of the private image runs on the learner', async () => (await runningTasks('private-on-learner'))[0]);
    const n4 = byName('n4');
    const learnerCred: ClientCredential = { caPem: admin.caPem, cert: { certPem: readFileSync(path.join(n4.dir, 'tls', 'node.crt'), 'utf8'), keyPem: readFileSync(path.join(n4.dir, 'tls', 'node.key'), 'utf8') } };
    const secret = registrySecretName('registry.lan:5000');
    const right = await callAs(leader(), learnerCred, 'POST', '/v1/keyring/data-key', { nodeId: n4.id, certPem: learnerCred.cert?.certPem, taskId: task.id, secret });
    expect(right.status).toBe(200);
    // Not for a task whose image is on another registry.
    const other = (await runningTasks('on-learner'))[0];
    const wrong = await callAs(leader(), learnerCred, 'POST', '/v1/keyring/data-key', { nodeId: n4.id, certPem: learnerCred.cert?.certPem, taskId: other?.id, secret });
    expect(wrong.body).toMatchObject({ code: 'certificate_refused', details: { reason: 'not_named' } });
    expect(leaks()).toEqual([]);
    await ok(leader(), 'DELETE', '/v1/services/private-on-learner');
    await ok(leader(), 'DELETE', '/v1/registries/registry.lan:5000');
  });

  it('autolock: a restarted voter serves reads and writes, holds back a task needing a secret with the reason, and runs it once unlocked', async () => {
    const on = await inProcess('cluster', 'autolock', 'on', '--yes', '--json', '--addr', leader().apiAddress, '--credential', credentialFile);
    expect(on.code, on.stderr).toBe(0);
    const unlockKey = (JSON.parse(on.stdout) as { unlockKey: string }).unlockKey;
    expect(unlockKey).toMatch(/^SHOAL-UNLOCK-1-/);
    keysShown.unlock = unlockKey;
    const unlockKeyId = readKeyring(leader().store)?.keyring.autolock?.unlockKeyId;
    // On again is refused, and keeps the unlock key just shown.
    const again = await inProcess('cluster', 'autolock', 'on', '--yes', '--json', '--addr', leader().apiAddress, '--credential', credentialFile);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('autolock_unchanged');
    expect(readKeyring(leader().store)?.keyring.autolock?.unlockKeyId).toBe(unlockKeyId);
    const voters = members.slice(0, 3);
    await until('every voter sealed its keys and its CA key', () => voters.every((m) => {
      const tls = path.join(m.dir, 'tls');
      const keys = readdirSync(path.join(tls, 'cluster-keys')).map((f) => readFileSync(path.join(tls, 'cluster-keys', f), 'utf8'));
      return keys.length > 0 && keys.every((t) => t.includes('"sealed"')) && !existsSync(path.join(tls, 'ca.key')) && existsSync(path.join(tls, 'ca.key.sealed'));
    }));
    // A follower voter restarts: locked.
    const victim = voters.find((m) => m.node?.node.isLeader !== true && m.name !== 'n2') ?? (voters.find((m) => m.node?.node.isLeader !== true) as Member);
    await victim.node?.stop();
    const restarted = await start(victim, voters);
    await until('the restarted voter reports itself locked', () => readHoldings(leader().store).get(victim.id)?.locked === true);
    expect(victim.lines.some((l) => l.includes('this node is autolocked'))).toBe(true);
    // It serves reads and writes.
    expect((await api(restarted, 'PUT', '/v1/docs/locked/w', { ok: true })).status).toBe(200);
    expect((await api(restarted, 'GET', '/v1/docs/locked/w')).status).toBe(200);
    // A task that needs a secret waits there, saying why; one it cannot sign a certificate for either.
    await ok(leader(), 'POST', '/v1/apply', { text: serviceYaml('on-locked', 'db', `node.name == ${victim.name}`) });
    const waiting = await until('the task waits, starting, with the reason', async () => {
      const items = (await ok(leader(), 'GET', '/v1/tasks?service=on-locked')).items as { id: string; observed: string; record: { message: string | null } }[];
      return items.find((t) => t.observed === 'starting' && (t.record.message ?? '').includes('autolocked'));
    });
    expect(waiting.record.message).toContain('shoal unlock');
    // Nothing of the unlock key, nor a key in the clear, on its disk.
    for (const f of filesUnder(victim.dir)) {
      expect(f.bytes.includes(Buffer.from(unlockKey)), f.file).toBe(false);
      expect(f.bytes.includes(Buffer.from('BEGIN PRIVATE KEY')) && !f.file.endsWith('node.key'), f.file).toBe(false);
    }
    const wrongFile = path.join(root, 'wrong-unlock.key');
    writeFileSync(wrongFile, `SHOAL-UNLOCK-1-${randomBytes(32).toString('base64url')}\n`);
    const wrong = await inProcess('unlock', '--key-file', wrongFile, '--json', '--addr', victim.apiAddress, '--credential', credentialFile);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('unlock_key_invalid');
    const keyFile = path.join(root, 'unlock.key');
    writeFileSync(keyFile, `${unlockKey}\n`, { mode: 0o600 });
    const unlocked = await inProcess('unlock', '--key-file', keyFile, '--json', '--addr', victim.apiAddress, '--credential', credentialFile);
    expect(unlocked.code, unlocked.stderr).toBe(0);
    expect(JSON.parse(unlocked.stdout)).toMatchObject({ unlocked: true, already: false });
    const task = await until('the task runs once unlocked', async () => (await runningTasks('on-locked'))[0], 20_000);
    await until('its file is written', () => existsSync(path.join(task.file, 'db')) && readFileSync(path.join(task.file, 'db'), 'utf8') !== '');
    expect(readFileSync(path.join(task.file, 'db'), 'utf8')).toBe(values.db);
    // With secrets.peerUnlock, an unlocked voter unlocks it after a restart, over mTLS, with nobody at the keyboard.
    await victim.node?.stop();
    const seen = victim.lines.length;
    await start(victim, voters, undefined, true);
    await until('an unlocked peer unlocks the restarted voter', () => victim.lines.slice(seen).some((l) => l.includes('unlocked by a peer')));
    expect(victim.lines.slice(seen).some((l) => l.includes('this node is autolocked'))).toBe(true);
    await until('it reports itself unlocked', () => readHoldings(leader().store).get(victim.id)?.locked === false);
    expect(leaks()).toEqual([]);
  });

  it('a snapshot restored on new machines reads its secrets with the recovery key, and is refused without it', async () => {
    const made = await inProcess('secret', 'recovery-key', '--yes', '--json', '--addr', leader().apiAddress, '--credential', credentialFile);
    expect(made.code, made.stderr).toBe(0);
    const recoveryKey = (JSON.parse(made.stdout) as { recoveryKey: string }).recoveryKey;
    keysShown.recovery = recoveryKey;
    await until('the keyring names the recovery key', () => readKeyring(leader().store)?.keyring.keys.every((k) => k.recovery !== null));
    const file = path.join(root, 'backup.snap');
    await saveSnapshotFile(file);
    expect(filesUnder(root).filter((f) => f.file === file).every((f) => !formsOf(values.db).some((x) => f.bytes.includes(x)))).toBe(true);
    const restoreDir = (name: string) => path.join(root, name);
    const restore = async (name: string, ...extra: string[]) => inProcess('snapshot', 'restore', file, '--data', restoreDir(name), '--name', name,
      '--api', `127.0.0.1:${await freePort()}`, '--peer', `127.0.0.1:${await freePort()}`, '--json', ...extra);
    const refused = await restore('r0');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('recovery_key_required');
    expect(existsSync(restoreDir('r0'))).toBe(false);
    const wrongFile = path.join(root, 'wrong.key');
    writeFileSync(wrongFile, `SHOAL-RECOVERY-1-${randomBytes(32).toString('base64url')}\n`);
    const wrong = await restore('r0', '--recovery-key-file', wrongFile);
    expect(wrong.stderr).toContain('unlock_key_invalid');
    expect(existsSync(restoreDir('r0'))).toBe(false);
    const keyFile = path.join(root, 'recovery.key');
    writeFileSync(keyFile, `${recoveryKey}\n`, { mode: 0o600 });
    const restored = await restore('r1', '--recovery-key-file', keyFile);
    expect(restored.code, restored.stderr).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ secrets: { readable: 2, unreadable: [] } });
    const discarded = await restore('r2', '--discard-secrets');
    expect(discarded.code, discarded.stderr).toBe(0);
    expect(JSON.parse(discarded.stdout)).toMatchObject({ secrets: { readable: 0, unreadable: ['api', 'db'] }, recoveryKey: expect.stringMatching(/^SHOAL-RECOVERY-1-/) });

    // The restored cluster (one node) reads the secret: a task of a new service gets it.
    const yaml = (await import('yaml')).parse(readFileSync(path.join(restoreDir('r1'), 'shoal.yaml'), 'utf8')) as { api: { listen: string }; peer: { listen: string } };
    const r1: Member = { name: 'r1', dir: restoreDir('r1'), id: loadIdentity(restoreDir('r1')).id, apiAddress: yaml.api.listen, peerAddress: yaml.peer.listen, lines: [] };
    const node = await startNode(configOf(r1, undefined, undefined), loggerFor(r1), { clusterEvents: false });
    try {
      const r1Ca = readFileSync(path.join(r1.dir, 'tls', 'ca.crt'), 'utf8');
      const r1Key = readFileSync(path.join(r1.dir, 'tls', 'ca.key'), 'utf8');
      const c = await issueClientCert({ certPem: r1Ca, keyPem: r1Key }, { principal: 'alice', role: 'admin' });
      const cred: ClientCredential = { caPem: r1Ca, cert: { certPem: c.certPem, keyPem: c.keyPem } };
      await until('the restored node leads at the current feature level', () => node.node.isLeader && node.node.featureLevel === featureLevelMax);
      const applied = await callAs(node, cred, 'POST', '/v1/apply', { text: serviceYaml('restored', 'db', 'node.name == r1') });
      expect(applied.status, JSON.stringify(applied.body)).toBe(200);
      const file = await until('the restored cluster runs the task with its secret', () => {
        const dir = path.join(shm, `shoal-${r1.id}`);
        if (!existsSync(dir)) return undefined;
        for (const t of readdirSync(dir)) {
          const f = path.join(dir, t, 'db');
          if (existsSync(f) && readFileSync(f, 'utf8') !== '') return f;
        }
        return undefined;
      });
      expect(readFileSync(file, 'utf8')).toBe(values.db);
      // Autolock was on in the old cluster: the restored one starts without it (its unlock key was the old cluster's).
      await until('the restored keyring has autolock off', () => readKeyring(node.store)?.keyring.autolock === null);
    } finally {
      await node.stop();
    }
    expect(leaks()).toEqual([]);
  });
});
