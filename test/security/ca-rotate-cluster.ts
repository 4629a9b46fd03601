// A cluster for the CA rotation tests: `count` founding voters on loopback serving HTTPS, whose
// data directories and peer addresses the tests read (tls-node.ts keeps those to itself).

import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../src/server/config.ts';
import { initNode, type Identity } from '../../src/node/identity.ts';
import { startNode, type RunningNode } from '../../src/server/server.ts';
import { silentLogger } from '../../src/log.ts';
import type { PemPair } from '../../src/security/certificates.ts';
import { freePort } from '../../bench/lib/proc.ts';
import { waitFor } from '../transport/helpers.ts';

export interface Member { node: RunningNode; dir: string; peerAddress: string }

/** The founders share the first one's CA (each voter also fetches the key itself). */
export async function rotationCluster(count: number): Promise<{ root: string; members: Member[]; oldCa: PemPair }> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-carot-'));
  const dirs = Array.from({ length: count }, (_, i) => path.join(root, `n${i + 1}`));
  const ids: Identity[] = [];
  for (const [i, dir] of dirs.entries()) ids.push(await initNode({ dataDir: dir, name: `n${i + 1}`, ...(i > 0 ? { caFrom: dirs[0] as string } : {}) }));
  const list: { id: string; name: string; apiAddress: string; peerAddress: string }[] = [];
  for (const [i, id] of ids.entries()) list.push({ id: id.id, name: `n${i + 1}`, apiAddress: `127.0.0.1:${await freePort()}`, peerAddress: `127.0.0.1:${await freePort()}` });
  const nodes = await Promise.all(list.map((m, i) => startNode(parseConfig({
    dataDir: dirs[i], api: { listen: m.apiAddress }, peer: { listen: m.peerAddress }, bootstrap: list,
    raft: { tickMs: 20, heartbeatIntervalMs: 20, electionTimeoutMs: 200 }, runtime: { kind: 'none' },
  }, 'test'), silentLogger, { clusterEvents: false })));
  await waitFor('a leader', () => nodes.some((n) => n.node.isLeader) && nodes.every((n) => n.node.leaderId !== ''), 20_000);
  const tlsDir = path.join(dirs[0] as string, 'tls');
  const oldCa = { certPem: readFileSync(path.join(tlsDir, 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(tlsDir, 'ca.key'), 'utf8') };
  return { root, members: nodes.map((node, i) => ({ node, dir: dirs[i] as string, peerAddress: list[i]?.peerAddress as string })), oldCa };
}
