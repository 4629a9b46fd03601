// A data directory written by the first release (v0.1.0): this build replays its snapshot and
// log into the same store, byte for byte, then raises the cluster feature level and serves.
// The fixture and how it was made: test/fixtures/release-0.1.0/ (make-fixture.mjs).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/server/config.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import { startNode, type RunningNode, type StartOptions } from '../../src/server/server.ts';
import { decodeSnapshotFile } from '../../src/node/recovery/snapshot-file.ts';
import { decodeSnapshot } from '../../fsm/snapshot.ts';
import { atFixtureTime } from '../support/fixture-time.ts';
import { waitFor } from '../transport/helpers.ts';
import { freePort } from '../../bench/lib/proc.ts';

const fixture = new URL('../fixtures/release-0.1.0/', import.meta.url);
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

let running: RunningNode | undefined;
afterEach(async () => {
  await running?.stop();
  running = undefined;
});

async function startFromFixture(dir: string, opts: StartOptions = {}): Promise<RunningNode> {
  const raw = parseYaml(readFileSync(path.join(dir, 'shoal.yaml'), 'utf8')) as Record<string, unknown>;
  raw.api = { listen: `127.0.0.1:${await freePort()}`, insecureLoopback: true };
  raw.peer = { listen: `127.0.0.1:${await freePort()}` };
  writeFileSync(path.join(dir, 'shoal.yaml'), stringify(raw));
  const config = parseConfig({ ...raw, dataDir: dir, runtime: { kind: 'none' } }, 'fixture');
  return startNode(config, quiet, opts);
}

function unpackFixture(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-prev-'));
  execFileSync('tar', ['xzf', path.join(fixture.pathname, 'data.tar.gz'), '-C', dir]);
  return dir;
}

/** Every document outside the control plane's reserved collections, for comparing stores across the upgrade. */
function userDocs(store: RunningNode['store']): unknown[] {
  return ['items', 'other', 'txn', 'idem', 'keep'].flatMap((c) => store.list(c, { limit: 1000 }).items);
}

describe('a data directory of the first release', () => {
  it('replays into the same store, byte for byte, as a node still at level 1 (an older member holds the level)', async () => {
    const expected = decodeSnapshotFile(readFileSync(path.join(fixture.pathname, 'expected.snap')), 'expected.snap');
    // The node's own event writes (leader elected) would change the store compared here: they
    // stay in its ring.
    running = await startFromFixture(unpackFixture(), { featureLevelMax: 1, clusterEvents: false });
    const node = running.node;
    await waitFor('a leader', () => node.isLeader, 10_000);
    await node.readBarrier();
    expect(node.featureLevel).toBe(1);
    expect(Buffer.from(running.store.snapshot()).equals(Buffer.from(expected.app))).toBe(true);
    expect(running.store.revision).toBe(expected.index);
  });

  it('then moves to the current feature level, keeps every document, and serves', async () => {
    const expected = decodeSnapshotFile(readFileSync(path.join(fixture.pathname, 'expected.snap')), 'expected.snap');
    // The fixture's idempotency records live 24 hours of log time, and at level 1 log time is the
    // proposers' wall clock: the replay below is a replay only on the fixture's day.
    atFixtureTime(decodeSnapshot(expected.app).logTimeMs);
    const dir = unpackFixture();
    running = await startFromFixture(dir, { featureLevelMax: 1 });
    await waitFor('a leader', () => running?.node.isLeader === true, 10_000);
    await running.node.readBarrier();
    const before = userDocs(running.store);
    await running.stop();
    // The same data directory under this build: a one-node cluster supports its level at once.
    running = await startFromFixture(dir);
    const node = running.node;
    await waitFor('the feature level raise', () => node.featureLevel === featureLevelMax, 10_000);
    await node.readBarrier();
    expect(userDocs(running.store)).toEqual(before);
    expect(before.length).toBeGreaterThan(100);
    expect(expected.index).toBeGreaterThan(0);
    const res = await fetch(`http://${running.apiAddress}/v1/docs/after/upgrade`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"ok":true}' });
    expect(res.status).toBe(200);
    const replay = await fetch(`http://${running.apiAddress}/v1/docs/idem/d3`, { method: 'PUT', headers: { 'content-type': 'application/json', 'idempotency-key': 'key-3', 'x-shoal-principal': 'robot' }, body: '{"v":3}' });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });

});
