// A data directory written by the first release (v0.1.0): this build replays its snapshot and
// log into the same store, byte for byte, then raises the cluster feature level and serves.
// The fixture and how it was made: test/fixtures/release-0.1.0/ (make-fixture.mjs).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/node/config.ts';
import { featureLevelMax } from '../../src/node/feature-level.ts';
import { startNode, type RunningNode } from '../../src/node/server.ts';
import { decodeSnapshotFile } from '../../src/node/snapshot-file.ts';
import { waitFor } from '../transport/helpers.ts';
import { freePort } from '../../bench/lib/proc.ts';

const fixture = new URL('../fixtures/release-0.1.0/', import.meta.url);
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

let running: RunningNode | undefined;
afterEach(async () => {
  await running?.stop();
  running = undefined;
});

async function startFromFixture(): Promise<RunningNode> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-prev-'));
  execFileSync('tar', ['xzf', path.join(fixture.pathname, 'data.tar.gz'), '-C', dir]);
  const raw = parseYaml(readFileSync(path.join(dir, 'shoal.yaml'), 'utf8')) as Record<string, unknown>;
  raw.api = { listen: `127.0.0.1:${await freePort()}` };
  raw.peer = { listen: `127.0.0.1:${await freePort()}` };
  writeFileSync(path.join(dir, 'shoal.yaml'), stringify(raw));
  const config = parseConfig({ ...raw, dataDir: dir }, 'fixture');
  // The node's own event writes (leader elected, feature level raised) would change the store
  // this test compares with the fixture's: they stay in the node's ring.
  return startNode(config, quiet, { clusterEvents: false });
}

describe('a data directory of the first release', () => {
  it('replays into the same store, byte for byte, and then moves to the current feature level and serves', async () => {
    const expected = decodeSnapshotFile(readFileSync(path.join(fixture.pathname, 'expected.snap')), 'expected.snap');
    running = await startFromFixture();
    const node = running.node;
    await waitFor('a leader', () => node.isLeader, 10_000);
    await node.readBarrier();
    const store = running.store;
    expect(node.featureLevel === 1 || node.featureLevel === featureLevelMax).toBe(true);
    expect(Buffer.from(store.snapshot()).equals(Buffer.from(expected.app))).toBe(true);
    expect(store.revision).toBe(expected.index);

    // A one-node cluster: every member supports this build's level at once.
    await waitFor('the feature level raise', () => node.featureLevel === featureLevelMax, 10_000);
    expect(Buffer.from(store.snapshot()).equals(Buffer.from(expected.app))).toBe(true);
    const res = await fetch(`http://${running.apiAddress}/v1/docs/after/upgrade`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"ok":true}' });
    expect(res.status).toBe(200);
    const replay = await fetch(`http://${running.apiAddress}/v1/docs/idem/d3`, { method: 'PUT', headers: { 'content-type': 'application/json', 'idempotency-key': 'key-3', 'x-shoal-principal': 'robot' }, body: '{"v":3}' });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });
});
