// A one-voter node on the in-memory transport with the real document store, and the API built
// on it, for inject() tests. With `control`, the node also runs the control plane (its leader
// loops and its agent on an in-memory runtime), as `runtime: {kind: memory}` does in a config.

import type { FastifyInstance } from 'fastify';
import { DocumentStore } from '../../fsm/index.ts';
import { buildApi, type ApiContext, type ApiLimits } from '../../src/api/app.ts';
import { Registry } from '../../src/base/metrics.ts';
import type { ApiAuth } from '../../src/api/auth.ts';
import { PeerHttp } from '../../src/api/peer-http.ts';
import { EventLog } from '../../src/node/events/event-log.ts';
import { silentLogger } from '../../src/log.ts';
import { MemoryNodeStorage } from '../../src/node/node-storage.ts';
import { RaftNode } from '../../src/node/raft-node.ts';
import { bootstrapSnapshotData } from '../../src/server/server.ts';
import { featureLevelMax } from '../../src/base/feature-level.ts';
import { bootstrapStorage, MemoryStorage } from '../../src/raft/storage.ts';
import { MemoryNetwork } from '../../transport/memory-transport.ts';
import { ControlPlane } from '../../src/server/control-plane.ts';
import { systemClock } from '../../src/executor/clock.ts';
import { MemoryRuntime } from '../../src/executor/memory-runtime.ts';
import type { LeaseConfig } from '../../src/resources/lease.ts';
import type { VipSpec } from '../../src/resources/vips.ts';
import { MemoryClusterKeys } from '../../src/security/cluster-key-files.ts';
import { SecretKeyring } from '../../src/control/secret-keyring.ts';
import { SecretSource } from '../../src/server/secret-source.ts';

export interface SingleNode {
  app: FastifyInstance;
  ctx: ApiContext;
  node: RaftNode;
  store: DocumentStore;
  /** With `control`: the control plane and its in-memory runtime. */
  control?: ControlPlane;
  /** The cluster keys this sole voter holds, and its keyring loop (it leads: it makes the keyring at level 6). */
  keys: MemoryClusterKeys;
  keyring: SecretKeyring;
  runtime?: MemoryRuntime;
  close(): Promise<void>;
}

export interface SingleNodeOptions {
  bodyBytesMax?: number;
  voters?: string[];
  limits?: Partial<ApiLimits>;
  /** Run the control plane (leader loops, and an agent on an in-memory runtime). */
  control?: boolean;
  /** The highest feature level the node applies (1 plays a release without the control plane). */
  featureLevelMax?: number;
  /** How callers authenticate (default: insecure, as api.insecureLoopback). */
  auth?: ApiAuth;
  /** The exclusive-task lease of the control plane (config `exclusive`). */
  lease?: LeaseConfig;
  /** The virtual IPs its leader loops manage (config `vips`; issue 38). */
  vips?: VipSpec[];
  /** Whether its node says it runs the routing mesh (NodeRecord.ingress; issue 38); absent: it says nothing. */
  ingress?: boolean;
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

function controlPlane(node: RaftNode, store: DocumentStore, lease: LeaseConfig | undefined, keys: MemoryClusterKeys, vips?: VipSpec[], ingress?: boolean): { control: ControlPlane; runtime: MemoryRuntime } {
  const runtime = new MemoryRuntime({ clock: systemClock, pullAny: true });
  const source = new SecretSource({ store, keys, nodeId: 'solo', members: () => ({ list: [], leader: 'solo' }), voters: () => ['solo'], log: quiet });
  const control = new ControlPlane({
    secrets: { read: (name, taskId) => source.read(name, taskId) },
    node, store, clusterId: 'test-cluster', runtime, health: { suspectAfterMs: 5_000, downAfterMs: 15_000, restartGraceMs: 30_000 }, log: quiet,
    identity: { id: 'solo', name: 'solo', apiAddress: '127.0.0.1:1', peerAddress: 'memory:solo', softwareVersion: '0.0.0-test', capacity: { cpuMillis: 4000, memoryBytes: 8 * 1024 ** 3 }, labels: {}, ...(ingress !== undefined ? { ingress } : {}) },
    ...(lease !== undefined ? { lease } : {}),
    ...(vips !== undefined ? { vips } : {}),
  });
  control.start();
  return { control, runtime };
}

export async function singleNode(opts: SingleNodeOptions = {}): Promise<SingleNode> {
  const store = new DocumentStore({ eventsRetainedMax: 50 });
  const log = new MemoryStorage();
  const member = { id: 'solo', name: 'solo', peerAddress: 'memory:solo', apiAddress: '127.0.0.1:1' };
  bootstrapStorage(log, opts.voters ?? ['solo'], [], bootstrapSnapshotData([member], store.snapshot()));
  const transport = new MemoryNetwork().transport('solo');
  await transport.start();
  const node = new RaftNode({
    id: 'solo', storage: new MemoryNodeStorage(log), transport, stateMachine: store, tickMs: 5, proposalTimeoutMs: 2000,
    ...(opts.featureLevelMax !== undefined ? { featureLevelMax: opts.featureLevelMax } : {}),
  });
  await node.start();
  const deadline = Date.now() + 5000;
  // A sole voter leads, then raises the cluster feature level (an entry of its own): wait for both.
  const level = opts.featureLevelMax ?? featureLevelMax;
  while (opts.voters === undefined && (!node.isLeader || node.featureLevel < level) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  const keys = new MemoryClusterKeys();
  const keyring = new SecretKeyring({ node, store, keys, log: quiet });
  keyring.start();
  if (level >= 6 && opts.voters === undefined) {
    while (store.get('shoal.cluster-keys', 'keyring') === undefined && Date.now() < deadline + 5000) await new Promise((r) => setTimeout(r, 5));
  }
  const metrics = new Registry();
  metrics.add(node.proposalLatency);
  const ctx: ApiContext = {
    node, store, clusterId: 'test-cluster', softwareVersion: '0.0.0-test', bodyBytesMax: opts.bodyBytesMax ?? 64 * 1024,
    proposalTimeoutMs: 2000, metrics, streams: new Set(), ...(opts.limits !== undefined ? { limits: opts.limits } : {}),
    events: new EventLog({ node, store, identity: { id: 'solo', name: 'solo' }, log: silentLogger }),
    // inject() has no TLS socket: callers are admin unless they present a bearer token (src/api/auth.ts).
    auth: opts.auth ?? { mode: 'insecure' }, peer: new PeerHttp(null), clusterKeys: keys,
  };
  const app = buildApi(ctx);
  await app.ready();
  const cp = opts.control === true ? controlPlane(node, store, opts.lease, keys, opts.vips, opts.ingress) : undefined;
  // As server.ts wires it: task logs are read through this node's runtime.
  if (cp !== undefined) ctx.runtime = cp.runtime;
  return {
    app, ctx, node, store, keys, keyring, ...(cp !== undefined ? { control: cp.control, runtime: cp.runtime } : {}),
    close: async () => { await cp?.control.close(); await keyring.close(); await app.close(); await node.stop(); },
  };
}

/** singleNode() listening on a free loopback port, for tests that call it as a client would; `addr` is host:port. */
export async function listeningSingleNode(opts: SingleNodeOptions = {}): Promise<{ n: SingleNode; addr: string }> {
  const n = await singleNode(opts);
  await n.app.listen({ host: '127.0.0.1', port: 0 });
  return { n, addr: `127.0.0.1:${(n.app.server.address() as { port: number }).port}` };
}
