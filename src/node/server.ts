// Runs one node: identity, durable storage, peer transport, the Raft driver and the client API,
// wired from a validated config. The process entry (`shoal serve`) and the tests both use it.

import { Packr } from 'msgpackr';
import type { FastifyInstance } from 'fastify';
import { buildApi } from '../api/app.ts';
import { ShoalError } from '../errors.ts';
import { DiskStorage } from '../storage/index.ts';
import { WsTransport } from '../../transport/ws-transport.ts';
import { KvStateMachine } from './kv-state-machine.ts';
import { loadIdentity, loadTls, type Identity } from './identity.ts';
import type { MemberRecord } from './membership.ts';
import { splitHostPort, type NodeConfig } from './config.ts';
import { RaftNode, type Logger } from './raft-node.ts';
import type { NodeStorage } from './node-storage.ts';
import { emptyConfState } from '../raft/storage.ts';

export const softwareVersion = '0.1.0';
export const protocolVersion = 1;
const packr = new Packr({ useRecords: false });

export interface RunningNode {
  identity: Identity;
  node: RaftNode;
  api: FastifyInstance;
  apiAddress: string;
  /** Graceful: hands leadership away when leading, then closes API, transport and storage. */
  stop(): Promise<void>;
}

/** The snapshot every founding member starts from; identical bytes on every founder. */
export function bootstrapSnapshotData(members: MemberRecord[], app: Uint8Array): Uint8Array {
  const sorted = [...members].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return packr.pack({ members: sorted, app });
}

async function bootstrapIfNew(storage: NodeStorage, config: NodeConfig, identity: Identity, kv: KvStateMachine, log: Logger): Promise<void> {
  if (storage.log.lastIndex() > 0) return;
  const founders = config.bootstrap;
  if (founders === undefined || founders.length === 0) {
    log.info('empty log and no bootstrap list: waiting to be added to a cluster (a snapshot will arrive from its leader)');
    return;
  }
  if (!founders.some((m) => m.id === identity.id)) {
    throw new ShoalError('config_invalid', `bootstrap lists ${founders.map((m) => m.id).join(', ')} but not this node (${identity.id}); add it or remove the bootstrap list to join instead`);
  }
  const voters = founders.map((m) => m.id).sort();
  await storage.save({
    entries: [],
    hardState: { term: 1, vote: '', commit: 1 },
    snapshot: { meta: { index: 1, term: 1, confState: { ...emptyConfState(), voters } }, data: bootstrapSnapshotData(founders, kv.snapshot()) },
  }, { sync: true });
  log.info(`bootstrapped a new cluster with ${voters.length} voters`);
}

export async function startNode(config: NodeConfig, log: Logger): Promise<RunningNode> {
  const identity = loadIdentity(config.dataDir);
  const tls = loadTls(config.dataDir);
  const storage = await DiskStorage.open(config.dataDir, { logger: log });
  const kv = new KvStateMachine();
  try {
    await bootstrapIfNew(storage, config, identity, kv, log);
  } catch (err) {
    await storage.close();
    throw err;
  }
  const peerListen = splitHostPort(config.peer.listen);
  const transport = new WsTransport({
    nodeId: identity.id, clusterId: identity.clusterId, listen: peerListen, tls,
    protocolVersion, protocolVersionsSupported: { min: 1, max: protocolVersion }, softwareVersion, logger: log,
  });
  const node = new RaftNode({
    id: identity.id, storage, transport, stateMachine: kv, logger: log,
    tickMs: config.raft.tickMs,
    electionTimeoutTicks: config.raft.electionTimeoutMs / config.raft.tickMs,
    heartbeatIntervalTicks: config.raft.heartbeatIntervalMs / config.raft.tickMs,
    snapshotEntries: config.raft.snapshotEntries, logKeepEntries: config.raft.logKeepEntries,
    appendBytesMax: config.raft.appendBytesMax, appendsInflightMax: config.raft.appendsInflightMax,
    uncommittedBytesMax: config.raft.uncommittedBytesMax, proposalTimeoutMs: config.limits.proposalTimeoutMs,
  });
  await transport.start();
  await node.start();
  const api = buildApi({ node, kv, clusterId: identity.clusterId, softwareVersion, bodyBytesMax: config.limits.bodyBytesMax });
  const apiListen = splitHostPort(config.api.listen);
  try {
    await api.listen({ host: apiListen.host, port: apiListen.port });
  } catch (err) {
    await node.stop();
    throw new ShoalError('config_invalid', `cannot listen on ${config.api.listen}: ${(err as Error).message}`);
  }
  const addr = api.server.address();
  const apiAddress = typeof addr === 'object' && addr !== null ? `${apiListen.host}:${addr.port}` : config.api.listen;
  let stopping: Promise<void> | undefined;
  return {
    identity, node, api, apiAddress,
    stop: () => {
      stopping ??= (async () => {
        await node.stop();
        await api.close();
      })();
      return stopping;
    },
  };
}
