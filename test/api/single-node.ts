// A one-voter node on the in-memory transport with the real document store, and the API built
// on it, for inject() tests.

import type { FastifyInstance } from 'fastify';
import { DocumentStore } from '../../fsm/index.ts';
import { buildApi, type ApiContext, type ApiLimits } from '../../src/api/app.ts';
import { Registry } from '../../src/node/metrics.ts';
import { EventLog } from '../../src/node/event-log.ts';
import { silentLogger } from '../../src/log.ts';
import { MemoryNodeStorage } from '../../src/node/node-storage.ts';
import { RaftNode } from '../../src/node/raft-node.ts';
import { bootstrapSnapshotData } from '../../src/node/server.ts';
import { bootstrapStorage, MemoryStorage } from '../../src/raft/storage.ts';
import { MemoryNetwork } from '../../transport/memory-transport.ts';

export interface SingleNode {
  app: FastifyInstance;
  ctx: ApiContext;
  node: RaftNode;
  store: DocumentStore;
  close(): Promise<void>;
}

export async function singleNode(opts: { bodyBytesMax?: number; voters?: string[]; limits?: Partial<ApiLimits> } = {}): Promise<SingleNode> {
  const store = new DocumentStore({ eventsRetainedMax: 50 });
  const log = new MemoryStorage();
  const member = { id: 'solo', name: 'solo', peerAddress: 'memory:solo', apiAddress: '127.0.0.1:1' };
  bootstrapStorage(log, opts.voters ?? ['solo'], [], bootstrapSnapshotData([member], store.snapshot()));
  const transport = new MemoryNetwork().transport('solo');
  await transport.start();
  const node = new RaftNode({ id: 'solo', storage: new MemoryNodeStorage(log), transport, stateMachine: store, tickMs: 5, proposalTimeoutMs: 2000 });
  await node.start();
  const deadline = Date.now() + 5000;
  while (opts.voters === undefined && !node.isLeader && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  const metrics = new Registry();
  metrics.add(node.proposalLatency);
  const ctx: ApiContext = {
    node, store, clusterId: 'test-cluster', softwareVersion: '0.0.0-test', bodyBytesMax: opts.bodyBytesMax ?? 64 * 1024,
    proposalTimeoutMs: 2000, metrics, streams: new Set(), ...(opts.limits !== undefined ? { limits: opts.limits } : {}),
    events: new EventLog({ node, store, identity: { id: 'solo', name: 'solo' }, log: silentLogger }),
  };
  const app = buildApi(ctx);
  await app.ready();
  return { app, ctx, node, store, close: async () => { await app.close(); await node.stop(); } };
}
