// The size of a backup's store snapshot for a homelab far larger than most: one node with the
// control plane running (leader loops, an agent on the in-memory runtime), N services of one
// replica each, their tasks placed and running, and N/10 secrets sealed under the cluster key,
// then one `shoal backup now` to a directory target. It prints what the backup holds (the store
// snapshot, the keys file, the manifest) in bytes, and the documents by collection. The figure is
// quoted in docs/operations.md ("Backups": why a backup is written whole, not incremental).
//
//   npm run bench:backup-size -- [--services 1000]
//
// Measured 2026-12-06 (2-core shared machine), 1,000 services, 100 secrets, 1,000 tasks running:
// store.snap 1,408,761 bytes (1.4 MB; 118 KB gzipped), keys.json 174 bytes, manifest.json 535.

import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { BackupRunner } from '../src/node/backup/backup-runner.ts';
import { taskStatusCollection } from '../src/resources/collections.ts';
import { singleNode } from '../test/api/single-node.ts';

const { values } = parseArgs({ options: { services: { type: 'string', default: '1000' } } });
const services = Number(values.services);
if (!Number.isInteger(services) || services < 1 || services > 100_000) throw new Error('--services takes a count from 1 to 100000');
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-backup-size-'));

const s = await singleNode({ control: true });
try {
  s.ctx.backups = new BackupRunner({ node: s.node, store: s.store, clusterId: 'bench', version: 'bench', log: quiet, clusterKeys: s.keys });
  const secrets = Math.max(1, Math.floor(services / 10));
  for (let i = 0; i < secrets; i++) {
    const r = await s.app.inject({ method: 'PUT', url: `/v1/secrets/secret-${i}`, payload: { value: `value-${i}-${'x'.repeat(32)}` } });
    if (r.statusCode !== 200) throw new Error(`PUT secret: ${r.statusCode} ${r.body}`);
  }
  const batch = 50;
  for (let i = 0; i < services; i += batch) {
    const text = Array.from({ length: Math.min(batch, services - i) }, (_, k) => {
      const n = i + k;
      return `apiVersion: shoal/v1\nkind: Service\nname: svc-${n}\nimage: registry.lan/app-${n % 50}:1.${n % 7}\ncommand: ["sleep", "3600"]\nreplicas: 1\nenv: {MODE: production, INDEX: "${n}"}\nsecrets: [secret-${n % secrets}]\n`;
    }).join('---\n');
    const r = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text } });
    if (r.statusCode !== 200) throw new Error(`apply: ${r.statusCode} ${r.body.slice(0, 600)}`);
  }
  const deadline = Date.now() + 300_000;
  let running = 0;
  for (;;) {
    running = s.store.list(taskStatusCollection, { limit: 100_000 }).items.filter((d) => d.doc.state === 'running').length;
    if (running >= services || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const put = await s.app.inject({ method: 'PUT', url: '/v1/backup-targets/nas', payload: { dir } });
  if (put.statusCode !== 200) throw new Error(`target: ${put.body}`);
  const taken = await s.app.inject({ method: 'POST', url: '/v1/backups', payload: { target: 'nas' } });
  if (taken.statusCode !== 200) throw new Error(`backup: ${taken.body}`);
  const { id } = taken.json() as { id: string };
  const files = readdirSync(path.join(dir, id)).map((f) => ({ f, bytes: statSync(path.join(dir, id, f)).size }));
  const snap = readFileSync(path.join(dir, id, 'store.snap'));
  const counts = s.store.collections().map((c) => `${c.name}=${c.documents}`).join(' ');
  console.log(`services ${services}, secrets ${secrets}, tasks running ${running}`);
  console.log(`documents: ${counts}`);
  for (const { f, bytes } of files) console.log(`${f}: ${bytes} bytes (${(bytes / 1024).toFixed(0)} KiB)`);
  console.log(`store.snap gzipped (for comparison only; not how it is stored): ${gzipSync(snap).length} bytes`);
} finally {
  await s.ctx.backups?.close();
  await s.close();
  rmSync(dir, { recursive: true, force: true });
}
