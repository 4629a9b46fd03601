// A data directory written by the release the rolling upgrade starts from (v0.1.0, commit d44deae,
// feature level 5), holding secrets in the clear: in its log segment, its snapshot file, and the
// files its agent wrote for a task under DATA/secrets. Started under this build, the node raises
// the cluster to feature level 6, encrypts the secrets, compacts the watch events that held them,
// rewrites its log and snapshot files without them, and moves the task's files to a tmpfs: no
// byte of the data directory or of its log holds a value any more, deleted and replaced values
// included, and the task reads its secrets as before. The fixture and how it was made:
// test/fixtures/release-0.1.0-secrets/ (make-fixture.mjs; docs/testing.md, "Fixtures that age").

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/server/config.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import { startNode, type RunningNode } from '../../src/server/server.ts';
import type { Logger } from '../../src/log.ts';
import { readKeyring } from '../../src/resources/cluster-keyring.ts';
import { secretsCollection, tasksCollection } from '../../src/resources/collections.ts';
import { purgedThrough } from '../../src/node/secrets/secret-purge.ts';
import { atFixtureTime } from '../support/fixture-time.ts';
import { waitFor } from '../transport/helpers.ts';
import { freePort } from '../../bench/lib/proc.ts';

const fixture = new URL('../fixtures/release-0.1.0-secrets/', import.meta.url);
const values = JSON.parse(readFileSync(new URL('values.json', fixture), 'utf8')) as Record<string, string | number>;
const shm = mkdtempSync(path.join('/dev/shm', 'shoal-prev-secrets-'));
const lines: string[] = [];
const logger: Logger = {
  debug: (m) => lines.push(m), info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m),
};

let running: RunningNode | undefined;
afterEach(async () => {
  await running?.stop();
  running = undefined;
});
afterAll(() => rmSync(shm, { recursive: true, force: true }));

async function startFromFixture(dir: string): Promise<RunningNode> {
  const raw = parseYaml(readFileSync(path.join(dir, 'shoal.yaml'), 'utf8')) as Record<string, unknown>;
  raw.api = { listen: `127.0.0.1:${await freePort()}`, insecureLoopback: true };
  raw.peer = { listen: `127.0.0.1:${await freePort()}` };
  raw.secrets = { tmpfsDir: shm };
  writeFileSync(path.join(dir, 'shoal.yaml'), stringify(raw));
  return startNode(parseConfig({ ...raw, dataDir: dir }, 'fixture'), logger);
}

/** A value as it could sit in a file: itself, its hex, its base64 at any alignment. */
function formsOf(value: string): Buffer[] {
  const b = Buffer.from(value);
  const forms = [b, Buffer.from(b.toString('hex'))];
  for (let skip = 0; skip < 3; skip++) forms.push(Buffer.from(Buffer.concat([Buffer.alloc(skip), b]).toString('base64').slice(Math.ceil((skip * 4) / 3) + 1, -4)));
  return forms;
}

function holders(dir: string): string[] {
  const found: string[] = [];
  const files = readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
    .map((e) => ({ name: path.join(e.parentPath, e.name), bytes: readFileSync(path.join(e.parentPath, e.name)) }));
  for (const f of [...files, { name: 'the node\'s log', bytes: Buffer.from(lines.join('\n')) }]) {
    for (const key of ['db', 'tls', 'gone', 'dbOld']) if (formsOf(values[key] as string).some((x) => f.bytes.includes(x))) found.push(`${f.name} holds ${key}`);
  }
  return found;
}

describe('a data directory of v0.1.0 with secrets in the clear', () => {
  it('is re-encrypted at feature level 6, and no plain copy is left on its disk', async () => {
    atFixtureTime(values.madeAtMs as number);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-prev-secrets-'));
    try {
      execFileSync('tar', ['xzf', path.join(fixture.pathname, 'data.tar.gz'), '-C', dir]);
      // The fixture holds them, as the release left them (the search would find them).
      expect(holders(dir).length).toBeGreaterThanOrEqual(4);
      running = await startFromFixture(dir);
      const store = running.store;
      await waitFor('feature level 6', () => running?.node.featureLevel === featureLevelMax, 10_000);
      await waitFor('the store holds no plain secret and the node rewrote its log', () => {
        const k = readKeyring(store)?.keyring;
        return k !== undefined && k.scrubbedAt !== null && k.scrubbedAt > 0 && purgedThrough(dir) >= k.scrubbedAt;
      }, 20_000);
      const records = store.list(secretsCollection).items.map((d) => d.doc);
      expect(records.map((r) => [r.name, Object.hasOwn(r, 'value'), Object.hasOwn(r, 'sealed'), r.version])).toEqual([['db', false, true, 3], ['tls', false, true, 1]]);
      // The task's container went with the memory runtime: its replacement runs, its files on the tmpfs.
      const nodeDir = path.join(shm, `shoal-${running.identity.id}`);
      const runningTask = (): string | undefined => store.list(tasksCollection).items.find((t) => t.doc.service === 'app' && t.doc.desired === 'running' && existsSync(path.join(nodeDir, t.id, 'server.key')))?.id;
      await waitFor('a task of the service with its secret files on the tmpfs', () => runningTask() !== undefined, 15_000);
      const files = path.join(nodeDir, runningTask() as string);
      await waitFor('the files written', () => readFileSync(path.join(files, 'server.key'), 'utf8') !== '', 5_000);
      expect(readFileSync(path.join(files, 'db'), 'utf8')).toBe(values.db);
      expect(readFileSync(path.join(files, 'server.key'), 'utf8')).toBe(values.tls);
      expect(readdirSync(path.join(dir, 'secrets'))).toEqual([]);
      expect(holders(dir)).toEqual([]);
      expect(lines.some((l) => l.includes('encrypted 2 secret(s) written in the clear'))).toBe(true);

      // The rewritten log opens, and the secrets still decrypt.
      await running.stop();
      running = await startFromFixture(dir);
      await waitFor('a leader', () => running?.node.isLeader === true, 10_000);
      const again = (await fetch(`http://${running.apiAddress}/v1/secrets/db`).then((r) => r.json())) as { secret: { version: number } };
      expect(again.secret.version).toBe(3);
      expect(holders(dir)).toEqual([]);
    } finally {
      await running?.stop();
      running = undefined;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
