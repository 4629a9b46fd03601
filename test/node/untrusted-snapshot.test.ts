// A snapshot from a peer whose payload cannot be restored is refused before the core takes it:
// taken, it was written to disk and restored, and the restore stopped the node, then and at
// every start after.

import { Packr } from 'msgpackr';
import { afterEach, describe, expect, it } from 'vitest';
import { DocumentStore } from '../../fsm/index.ts';
import { checkSnapshotData, encodeSnapshotData } from '../../src/node/snapshot-data.ts';
import type { Message } from '../../src/raft/types.ts';
import { waitFor } from '../transport/helpers.ts';
import { KvStateMachine } from './kv-state-machine.ts';
import { MemoryCluster } from './memory-cluster.ts';

const packr = new Packr({ useRecords: false });
const members = [{ id: 'a1', name: 'n1', peerAddress: '127.0.0.1:7201', apiAddress: '127.0.0.1:7101' }];

describe('checkSnapshotData', () => {
  const kv = new KvStateMachine();
  const checkApp = (app: Uint8Array): string | undefined => kv.checkSnapshot(app);

  it('takes what the node writes, and empty data (the joining node\'s empty snapshot)', () => {
    expect(checkSnapshotData(encodeSnapshotData({ members, featureLevel: 1, removed: [] }, [kv.snapshot()]), checkApp)).toBeUndefined();
    expect(checkSnapshotData(new Uint8Array(0), checkApp)).toBeUndefined();
  });

  it.each([
    ['bytes that are not msgpack', new Uint8Array([0xc1, 0x00]), /not msgpack/],
    ['a value of another shape', packr.pack([1, 2, 3]), /not \{members, featureLevel, removed, app\}/],
    ['a member record without an address', packr.pack({ members: [{ id: 'x', name: 'n' }], app: new Uint8Array(0) }), /members\.0\.peerAddress/],
    ['an app that is not bytes', packr.pack({ members, app: 'text' }), /app/],
    ['an app the state machine cannot restore', encodeSnapshotData({ members, featureLevel: 1, removed: [] }, [packr.pack({ not: 'pairs' })]), /state machine cannot restore/],
  ])('refuses %s', (_what, data, why) => {
    expect(checkSnapshotData(data, checkApp)).toMatch(why);
  });

  it('takes a field it does not know, as restore does (a later release may add one, as this one added featureLevel and removed)', () => {
    expect(checkSnapshotData(packr.pack({ members, app: new KvStateMachine().snapshot(), extra: 1 }), checkApp)).toBeUndefined();
  });

  it('asks the document store about its own part', () => {
    const store = new DocumentStore();
    expect(store.checkSnapshot(store.snapshot())).toBeUndefined();
    expect(store.checkSnapshot(packr.pack({ format: 'shoal.fsm/1', revision: -1 }))).toMatch(/document store snapshot/);
    expect(store.checkSnapshot(new Uint8Array([0xde, 0x00]))).toMatch(/not valid msgpack/);
  });
});

describe('a node offered a snapshot it cannot restore', () => {
  let cluster: MemoryCluster;
  afterEach(async () => {
    await cluster.stopAll();
  });

  it.each([
    ['a payload that is not msgpack', new Uint8Array([0xc1, 0xff, 0x00])],
    ['a state machine part that does not decode', encodeSnapshotData({ members, featureLevel: 1, removed: [] }, [new Uint8Array([0xc1])])],
  ])('refuses %s before its core takes it, and stays up', async (_what, data) => {
    cluster = new MemoryCluster();
    await cluster.start();
    const leader = await cluster.waitForLeader();
    const follower = cluster.follower(leader);
    const m: Message = {
      type: 'snap', from: leader.id, to: follower.id, term: leader.node.currentTerm, logTerm: 0, index: 0, entries: [], commit: 0,
      reject: false, rejectHint: 0,
      snapshot: { meta: { index: follower.node.appliedIndex + 50, term: leader.node.currentTerm, confState: follower.node.confState() }, data },
    };
    const fate = registered(cluster, follower.id).injectValue(leader.id, m);
    expect(fate).toBe('bad_snapshot_data');
    const { index } = await leader.node.propose(KvStateMachine.encode({ op: 'put', key: 'k', value: 'v' }));
    await waitFor('the follower to apply the write', () => follower.node.appliedIndex >= index);
    expect(follower.kv.get('k')?.value).toBe('v');
    expect(follower.node.failure).toBeUndefined();
    expect(cluster.errors).toEqual([]);
    expect(registered(cluster, follower.id).inboundDrops().bad_snapshot_data).toBe(1);
  });
});

/** The transport a cluster node was started with (the network keeps one per node id). */
function registered(cluster: MemoryCluster, id: string) {
  const t = cluster.transports.get(id);
  if (t === undefined) throw new Error(`no transport for ${id}`);
  return t;
}
