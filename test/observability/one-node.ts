// One real node in this process (disk storage, TLS transport, the HTTP API on a free port),
// founding a cluster of its own, for the tests of /metrics and /v1/events.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../src/server/config.ts';
import { initNode } from '../../src/node/identity.ts';
import { startNode, type RunningNode } from '../../src/server/server.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { freePort } from '../../bench/lib/proc.ts';
import { waitFor } from '../transport/helpers.ts';

export interface OneNode {
  running: RunningNode;
  url: (p: string) => string;
  close: () => Promise<void>;
}

/** `limits`: the config's `limits` section (bounds a test wants small). */
export async function oneNode(log: Logger = silentLogger, limits: Record<string, number> = {}): Promise<OneNode> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-obs-'));
  const identity = await initNode({ dataDir: dir, name: 'solo' });
  const apiAddress = `127.0.0.1:${await freePort()}`;
  const peerAddress = `127.0.0.1:${await freePort()}`;
  const config = parseConfig({
    dataDir: dir, api: { listen: apiAddress, insecureLoopback: true }, peer: { listen: peerAddress },
    bootstrap: [{ id: identity.id, name: 'solo', apiAddress, peerAddress }],
    raft: { tickMs: 20, heartbeatIntervalMs: 20, electionTimeoutMs: 200 },
    // Containers simulated in the process: the control plane runs, with no Docker needed.
    runtime: { kind: 'memory' },
    limits,
  }, 'test');
  const running = await startNode(config, log);
  await waitFor('the node to lead', () => running.node.isLeader, 15_000);
  return {
    running,
    url: (p) => `http://${running.apiAddress}${p}`,
    close: async () => {
      await running.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
