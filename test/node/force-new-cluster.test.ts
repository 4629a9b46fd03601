// The storage rewrite of `shoal recover --force-new-cluster` (src/node/recovery/force-new-cluster.ts), on
// a survivor's log written by hand: a three-voter cluster with a learner, documents, and two
// entries past the commit index. The plan, the files it leaves, a real node started on the
// result (it leads alone, with every document), and the guards of the command.

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { freePort } from '../../bench/lib/proc.ts';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import { silentLogger } from '../../src/log.ts';
import { loadConfig } from '../../src/server/config.ts';
import { encodeCommandEnvelope } from '../../src/node/envelope.ts';
import { forceNewCluster, planForceNewCluster, writeForcedLog } from '../../src/node/recovery/force-new-cluster.ts';
import { initNode, loadIdentity, newId, type Identity } from '../../src/node/identity.ts';
import { confChangeContext, type MemberRecord } from '../../src/resources/membership.ts';
import { readMarker } from '../../src/node/recovery/recovery-files.ts';
import { bootstrapSnapshotData, startNode, type RunningNode } from '../../src/server/server.ts';
import { emptyConfState } from '../../src/raft/storage.ts';
import type { Entry } from '../../src/raft/types.ts';
import { DiskStorage } from '../../src/storage/index.ts';
import { inProcess } from '../cli/in-process.ts';
import { waitFor } from '../transport/helpers.ts';

const roots: string[] = [];
let running: RunningNode | undefined;
afterEach(async () => {
  await running?.stop();
  running = undefined;
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

interface Survivor {
  dir: string;
  identity: Identity;
  members: MemberRecord[];
  learner: MemberRecord;
  docs: string[];
}

async function record(id: string, name: string): Promise<MemberRecord> {
  return { id, name, apiAddress: `127.0.0.1:${await freePort()}`, peerAddress: `127.0.0.1:${await freePort()}` };
}

const put = (id: string, index: number): Uint8Array =>
  encodeCommandEnvelope('x/1', index, encodeCommand({ cmd: { op: 'put', collection: 'notes', id, doc: { n: index } }, ts: 1_000 + index }));

/**
 * A survivor's data directory: voters a (this node), b and c, learner d added by a conf change;
 * `docs` documents, the last two past the commit index. `tail` entries end the log.
 */
async function survivor(docs = 20, tail: (next: number, members: MemberRecord[]) => Entry[] = () => []): Promise<Survivor> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-recover-'));
  roots.push(root);
  const dir = path.join(root, 'a');
  const identity = await initNode({ dataDir: dir, name: 'a' });
  const members = [await record(identity.id, 'a'), await record(newId(), 'b'), await record(newId(), 'c')];
  const learner = await record(newId(), 'd');
  const voters = members.map((m) => m.id).sort();
  const storage = await DiskStorage.open(dir);
  const data = bootstrapSnapshotData(members, new DocumentStore().snapshot());
  await storage.save({ entries: [], hardState: { term: 1, vote: '', commit: 1 }, snapshot: { meta: { index: 1, term: 1, confState: { ...emptyConfState(), voters } }, data } });
  const entries: Entry[] = [{ kind: 'normal', term: 2, index: 2, data: new Uint8Array(0) }];
  entries.push({ kind: 'conf', term: 2, index: 3, change: { changes: [{ type: 'addLearner', node: learner.id }], context: confChangeContext([learner]) } });
  const ids: string[] = [];
  for (let i = 0; i < docs; i++) {
    const index = 4 + i;
    ids.push(`doc-${i}`);
    entries.push({ kind: 'normal', term: 2, index, data: put(`doc-${i}`, index) });
  }
  entries.push(...tail(4 + docs, members));
  await storage.save({ entries, hardState: { term: 2, vote: identity.id, commit: 3 + docs - 2 } });
  await storage.close();
  return { dir, identity, members, learner, docs: ids };
}

describe('planning a forced new cluster', () => {
  it('keeps every entry, and removes every other voter and learner through a joint configuration', async () => {
    const s = await survivor();
    const storage = await DiskStorage.open(s.dir);
    try {
      const plan = planForceNewCluster(storage, s.identity.id);
      expect(plan.lastIndex).toBe(23);
      expect(plan.hardState.commit).toBe(21);
      expect(plan.uncommitted).toBe(2);
      expect(plan.isMember).toBe(true);
      const others = [s.members[1], s.members[2], s.learner].map((m) => m?.id).sort();
      expect(plan.otherIds).toEqual(others);
      expect(plan.others.map((m) => m.id).sort()).toEqual(others);
      expect(plan.self?.name).toBe('a');
      expect(plan.forced.map((e) => [e.index, e.term])).toEqual([[24, 2], [25, 2]]);
      const [enter, leave] = plan.forced.map((e) => (e.kind === 'conf' ? e.change : undefined));
      expect(enter?.changes).toEqual([{ type: 'addVoter', node: s.identity.id }, ...others.map((node) => ({ type: 'removeNode', node }))]);
      expect(leave).toEqual({ changes: [], leaveJoint: true });
    } finally {
      await storage.close();
    }
  });

  it('leaves a joint configuration the log ends in first', async () => {
    // c being removed: the log ends in the joint configuration {a, b} / {a, b, c}.
    const removeC = (next: number, members: MemberRecord[]): Entry[] => [{ kind: 'conf', term: 2, index: next, change: { changes: [{ type: 'removeNode', node: members[2]?.id ?? '' }] } }];
    const s = await survivor(2, removeC);
    const storage = await DiskStorage.open(s.dir);
    const out = path.join(path.dirname(s.dir), 'new');
    try {
      const plan = planForceNewCluster(storage, s.identity.id);
      expect(plan.confState.votersOutgoing.length).toBe(3);
      expect(plan.forced.map((e) => (e.kind === 'conf' ? e.change.leaveJoint === true : 'normal'))).toEqual([true, false, true]);
      await writeForcedLog(out, storage, plan);
    } finally {
      await storage.close();
    }
    const back = await DiskStorage.open(out);
    try {
      expect(back.hardState().commit).toBe(back.lastIndex());
      expect(back.snapshot().meta.index).toBe(1);
    } finally {
      await back.close();
    }
  });
});

describe('forcing a new cluster on disk', () => {
  it('moves the old storage aside, gives a new cluster id, and the node leads alone with every document', async () => {
    const s = await survivor();
    const storage = await DiskStorage.open(s.dir);
    const plan = planForceNewCluster(storage, s.identity.id);
    const marker = await forceNewCluster(s.dir, storage, plan, s.identity, new Date('2026-12-02T01:02:03.456Z'));
    expect(marker).toMatchObject({ state: 'done', oldClusterId: s.identity.clusterId, commitIndex: 21, lastIndex: 23, index: 25, removed: plan.otherIds, backup: 'pre-recover-20261202T010203Z' });
    expect(marker.clusterId).not.toBe(s.identity.clusterId);
    expect(loadIdentity(s.dir)).toEqual({ ...s.identity, clusterId: marker.clusterId });
    expect(readMarker(s.dir)).toEqual({ ok: true, marker });
    const backup = path.join(s.dir, marker.backup);
    expect(readdirSync(backup).sort()).toEqual(['README', 'log.id', 'node.json', 'snapshots', 'storage.keys', 'wal']);
    expect(JSON.parse(readFileSync(path.join(backup, 'node.json'), 'utf8'))).toEqual(s.identity);
    expect(readdirSync(s.dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    // The old storage, as it was: it still opens, at the old commit index.
    const old = await DiskStorage.open(backup);
    expect([old.hardState().commit, old.lastIndex()]).toEqual([21, 23]);
    await old.close();

    running = await startOn(s);
    const node = running.node;
    await waitFor('the recovered node to lead', () => node.isLeader, 15_000);
    expect(node.membership.list().map((m) => m.id)).toEqual([s.identity.id]);
    expect(node.confState().voters).toEqual([s.identity.id]);
    for (const id of plan.otherIds) expect(node.isRemoved(id)).toBe(true);
    // Every document, the two past the old commit index too, at the revision its entry gave it.
    for (const [i, id] of s.docs.entries()) expect(running.store.get('notes', id)?.rev).toBe(4 + i);
    const res = await fetch(`http://${running.apiAddress}/v1/docs/notes/after`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"v":1}' });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { rev: number }).rev).toBeGreaterThan(25);
    const cluster = (await (await fetch(`http://${running.apiAddress}/v1/cluster`)).json()) as { clusterId: string; members: unknown[] };
    expect(cluster.clusterId).toBe(marker.clusterId);
    expect(cluster.members).toHaveLength(1);
  });
});

async function startOn(s: Survivor) {
  const self = s.members[0] as MemberRecord;
  writeFileSync(path.join(s.dir, 'shoal.yaml'), stringify({
    dataDir: '.', api: { listen: self.apiAddress, insecureLoopback: true }, peer: { listen: self.peerAddress },
    raft: { tickMs: 20, heartbeatIntervalMs: 20, electionTimeoutMs: 200 }, runtime: { kind: 'none' },
  }));
  return startNode(loadConfig(path.join(s.dir, 'shoal.yaml')), silentLogger);
}

describe('shoal recover --force-new-cluster: the guards', () => {
  const recover = (dir: string, ...more: string[]) => inProcess('recover', '--force-new-cluster', '--data', dir, '--json', ...more);
  const unchanged = (s: Survivor): void => {
    expect(loadIdentity(s.dir)).toEqual(s.identity);
    expect(existsSync(path.join(s.dir, 'recovered.json'))).toBe(false);
    expect(readdirSync(s.dir).filter((f) => f.startsWith('pre-recover') || f.startsWith('recover-'))).toEqual([]);
  };
  const errorOf = (stderr: string): { code: string; message: string } => (JSON.parse(stderr) as { error: { code: string; message: string } }).error;

  it('refuses while the node runs (data_dir_locked, exit 8)', async () => {
    const s = await survivor(2);
    const held = await DiskStorage.open(s.dir);
    try {
      const r = await recover(s.dir, '--yes');
      expect(r.code).toBe(8);
      expect(errorOf(r.stderr).code).toBe('data_dir_locked');
    } finally {
      await held.close();
    }
    unchanged(s);
  });

  it('refuses while another member answers, naming it; and without --yes off a terminal', async () => {
    const s = await survivor(2);
    const b = s.members[1] as MemberRecord;
    const server = net.createServer((c) => c.destroy());
    const { port } = new URL(`http://${b.peerAddress}`);
    await new Promise<void>((r) => server.listen(Number(port), '127.0.0.1', r));
    try {
      const r = await recover(s.dir, '--yes');
      expect(r.code).toBe(1);
      const err = errorOf(r.stderr);
      expect(err.code).toBe('members_reachable');
      expect(err.message).toContain(`refusing: b (${b.id}) answers on ${b.peerAddress} (peer).`);
    } finally {
      server.close();
    }
    unchanged(s);
    const r = await recover(s.dir);
    expect([r.code, errorOf(r.stderr).code]).toEqual([1, 'not_confirmed']);
    unchanged(s);
  });

  it('recovers once; a second run refuses with the marker', async () => {
    const s = await survivor(2);
    const r = await recover(s.dir, '--yes');
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { clusterId: string; oldClusterId: string; removed: string[]; uncommitted: number; index: number };
    expect(out).toMatchObject({ oldClusterId: s.identity.clusterId, uncommitted: 2, index: 7 });
    expect(out.removed).toHaveLength(3);
    const again = await recover(s.dir, '--yes');
    expect(again.code).toBe(1);
    const err = errorOf(again.stderr);
    expect(err.code).toBe('already_recovered');
    expect(err.message).toContain(`into cluster ${out.clusterId}`);
    expect(loadIdentity(s.dir).clusterId).toBe(out.clusterId);
  });

  it('refuses a node its own log removes, and a directory that holds no node', async () => {
    const removeSelf = (next: number, members: MemberRecord[]): Entry[] => [
      { kind: 'conf', term: 2, index: next, change: { changes: [{ type: 'removeNode', node: members[0]?.id ?? '' }] } },
      { kind: 'conf', term: 2, index: next + 1, change: { changes: [], leaveJoint: true } },
    ];
    const s = await survivor(2, removeSelf);
    const r = await recover(s.dir, '--yes');
    expect([r.code, errorOf(r.stderr).code]).toEqual([1, 'not_member']);
    unchanged(s);
    const empty = await recover(path.join(path.dirname(s.dir), 'nothing-here'), '--yes');
    expect([empty.code, errorOf(empty.stderr).code]).toEqual([1, 'not_found']);
  });

  it('refuses a node that is alone already', async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-recover-'));
    roots.push(root);
    const dir = path.join(root, 'solo');
    const identity = await initNode({ dataDir: dir, name: 'solo' });
    const storage = await DiskStorage.open(dir);
    const data = bootstrapSnapshotData([await record(identity.id, 'solo')], new DocumentStore().snapshot());
    await storage.save({ entries: [], hardState: { term: 1, vote: '', commit: 1 }, snapshot: { meta: { index: 1, term: 1, confState: { ...emptyConfState(), voters: [identity.id] } }, data } });
    await storage.close();
    const r = await recover(dir, '--yes');
    expect([r.code, errorOf(r.stderr).code]).toEqual([1, 'nothing_to_recover']);
  });
});
