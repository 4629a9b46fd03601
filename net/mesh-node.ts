// The mesh agent of a running node (src/server/server.ts): its ports on the node's applied store,
// its Raft node (membership, read barrier) and its record, wired from the node's config.

import type { DocumentStore } from '../fsm/index.ts';
import { nodesCollection } from '../src/resources/collections.ts';
import { StoreAgentWriter, type NodeIdentity } from '../src/executor/store-ports.ts';
import { ControlStateReader } from '../src/resources/state.ts';
import type { Logger } from '../src/log.ts';
import type { MembershipView } from '../src/ports/membership-view.ts';
import type { Proposer } from '../src/ports/proposer.ts';
import type { ReadBarrier } from '../src/ports/read-barrier.ts';
import { MeshAgent } from './mesh-agent.ts';
import type { MeshConfig } from './mesh-config.ts';
import { WgInterface } from './wg.ts';
import type { WgKeyPair } from './wg-keys.ts';

export function startMeshAgent(opts: { config: MeshConfig; keys: WgKeyPair; node: Proposer & ReadBarrier & Pick<MembershipView, 'confState'>; store: DocumentStore; identity: NodeIdentity; log: Logger }): MeshAgent {
  const { node, store } = opts;
  const reader = new ControlStateReader(store);
  const agent = new MeshAgent({
    self: opts.identity.id,
    config: opts.config,
    keys: opts.keys,
    wg: new WgInterface(opts.config.interface),
    view: {
      nodes: () => [...reader.read().nodes.values()].map((v) => v.value),
      members: () => {
        const cs = node.confState();
        return new Set([...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext]);
      },
      subscribe: (onChange) => {
        const offEvents = store.subscribe((ev) => { if (ev.collection === nodesCollection) onChange(); });
        const offRestore = store.subscribeRestore(() => onChange());
        return () => {
          offEvents();
          offRestore();
        };
      },
    },
    writer: new StoreAgentWriter(node, store, opts.identity),
    caughtUp: async () => { await node.readBarrier(); },
    log: opts.log,
  });
  agent.start();
  return agent;
}
