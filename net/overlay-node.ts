// The overlay agent of a running node (src/server/server.ts): its ports on the node's applied
// store, its Raft node (read barrier), the node's Docker daemon and, with a mesh, `ip`/`bridge`.

import type { DocumentStore } from '../fsm/index.ts';
import { networksCollection, readNetworkState } from '../src/resources/network-resources.ts';
import { nodesCollection } from '../src/resources/collections.ts';
import { ControlStateReader } from '../src/resources/state.ts';
import type { Logger } from '../src/log.ts';
import type { ReadBarrier } from '../src/ports/read-barrier.ts';
import { OverlayAgent } from './overlay-agent.ts';
import { DockerodeNetworks } from './overlay-docker.ts';
import { VxlanLinks } from './overlay-links.ts';

export function startOverlayAgent(opts: {
  node: ReadBarrier; store: DocumentStore; clusterId: string; nodeId: string;
  /** The mesh's MTU; null when the node has no mesh (no VXLAN then). */
  meshMtu: number | null;
  /** The Docker daemon's socket (config runtime.dockerSocket); undefined: DOCKER_HOST or the default. */
  dockerSocket: string | undefined;
  log: Logger;
}): OverlayAgent {
  const { node, store, log } = opts;
  const reader = new ControlStateReader(store);
  // Every pass reads the records again: a malformed one is told once, not every 5 s.
  const told = new Set<string>();
  const malformed = (collection: string, id: string, problem: string): void => {
    const line = `overlay: skipping malformed ${collection}/${id}: ${problem}`;
    if (told.has(line)) return;
    told.add(line);
    log.warn(line);
  };
  const agent = new OverlayAgent({
    self: opts.nodeId,
    clusterId: opts.clusterId,
    meshMtu: opts.meshMtu,
    view: {
      networks: () => [...readNetworkState(store, malformed).networks.values()].map((v) => v.value),
      nodes: () => [...reader.read().nodes.values()].map((v) => v.value),
      subscribe: (onChange) => {
        const offEvents = store.subscribe((ev) => { if (ev.collection === networksCollection || ev.collection === nodesCollection) onChange(); });
        const offRestore = store.subscribeRestore(() => onChange());
        return () => {
          offEvents();
          offRestore();
        };
      },
    },
    docker: new DockerodeNetworks(opts.dockerSocket),
    links: opts.meshMtu === null ? null : new VxlanLinks(),
    caughtUp: async () => { await node.readBarrier(); },
    log: { info: (m) => log.info(m), warn: (m) => log.warn(m), debug: (m) => log.debug(m) },
  });
  agent.start();
  return agent;
}
