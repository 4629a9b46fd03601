// Real nodes in this process serving the API over HTTPS with authentication (no insecure
// loopback), and clients that hold a given credential: what the attack tests aim at.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent } from 'undici';
import { parseConfig } from '../../src/server/config.ts';
import { initNode, type Identity } from '../../src/node/identity.ts';
import { startNode, type RunningNode } from '../../src/server/server.ts';
import { silentLogger } from '../../src/log.ts';
import { checkNodeServerIdentity } from '../../src/security/tls-identity.ts';
import type { PemPair } from '../../src/security/certificates.ts';
import { freePort } from '../../bench/lib/proc.ts';
import { waitFor } from '../transport/helpers.ts';
import { readHoldings, readKeyring } from '../../src/resources/cluster-keyring.ts';
import { peerViewsCollection } from '../../src/resources/peer-views.ts';

export interface TlsCluster {
  nodes: RunningNode[];
  /** The cluster CA, key included (the tests mint certificates with it). */
  ca: PemPair;
  close(): Promise<void>;
}

/** `count` founding nodes on loopback, each serving HTTPS with its node certificate. */
export async function tlsCluster(count = 1): Promise<TlsCluster> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'shoal-sec-'));
  const dirs = Array.from({ length: count }, (_, i) => path.join(root, `n${i + 1}`));
  const ids: Identity[] = [];
  for (const [i, dir] of dirs.entries()) ids.push(await initNode({ dataDir: dir, name: `n${i + 1}`, ...(i > 0 ? { caFrom: dirs[0] as string } : {}) }));
  const members: { id: string; name: string; apiAddress: string; peerAddress: string }[] = [];
  for (const [i, id] of ids.entries()) members.push({ id: id.id, name: `n${i + 1}`, apiAddress: `127.0.0.1:${await freePort()}`, peerAddress: `127.0.0.1:${await freePort()}` });
  const nodes = await Promise.all(members.map((m, i) => startNode(parseConfig({
    dataDir: dirs[i], api: { listen: m.apiAddress }, peer: { listen: m.peerAddress }, bootstrap: members,
    raft: { tickMs: 20, heartbeatIntervalMs: 20, electionTimeoutMs: 200 }, runtime: { kind: 'none' },
  }, 'test'), silentLogger, { clusterEvents: false })));
  await waitFor('a leader', () => nodes.some((n) => n.node.isLeader) && nodes.every((n) => n.node.leaderId !== ''), 20_000);
  // Just after the cluster reaches feature level 6 the leader writes the keyring and each voter
  // reports holding its key, and each node writes its first peer view (docs/control-plane.md,
  // "Node health"): writes in the background that a test counting revisions must not see.
  await waitFor('the keyring, its key held by every voter, and every peer view', () => {
    const leader = nodes.find((n) => n.node.isLeader);
    const keyring = leader === undefined ? undefined : readKeyring(leader.store)?.keyring;
    if (leader === undefined || keyring === undefined) return false;
    const holdings = readHoldings(leader.store);
    const viewsWritten = nodes.every((n) => leader.store.get(peerViewsCollection, n.identity.id) !== undefined);
    return viewsWritten && leader.node.confState().voters.every((v) => holdings.get(v)?.keys.includes(keyring.active) === true);
  }, 20_000);
  const n1 = dirs[0] as string;
  const ca = { certPem: readFileSync(path.join(n1, 'tls', 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(n1, 'tls', 'ca.key'), 'utf8') };
  return {
    nodes, ca,
    close: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export interface ClientCredential {
  /** The CA the client trusts (pinned). */
  caPem: string;
  cert?: PemPair;
  token?: string;
  headers?: Record<string, string>;
}

export interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

/** One HTTPS request with the given credential; the body parsed as JSON (or {text}). */
export async function call(node: RunningNode, cred: ClientCredential, method: string, urlPath: string, body?: unknown): Promise<Answer> {
  const agent = new Agent({
    connect: { ca: cred.caPem, checkServerIdentity: checkNodeServerIdentity, ...(cred.cert !== undefined ? { cert: cred.cert.certPem, key: cred.cert.keyPem } : {}) },
  });
  try {
    const headers: Record<string, string> = { ...cred.headers };
    if (cred.token !== undefined) headers.authorization = `Bearer ${cred.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`https://${node.apiAddress}${urlPath}`, {
      method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}), dispatcher: agent, signal: AbortSignal.timeout(15_000),
    } as RequestInit);
    const text = await res.text();
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(text) as Record<string, unknown>;
    } catch {
      parsed = { text };
    }
    return { status: res.status, headers: res.headers, body: parsed };
  } finally {
    await agent.close();
  }
}
