// What the agent asks before it creates a task's container on overlay networks: the task's
// address on each (the leader's allocation, in the network records of the applied store), the
// gateway there (the container's DNS server: the node's own, or the one its Docker network has
// where nodes share a daemon), and whether this node's overlay for the
// network is in place (net/overlay-agent.ts). Until all of it holds the agent does not create the
// container: it reports the task `starting` with a message saying what it waits for, and tries
// again when the store or the overlay changes (docs/agent.md, "Networks").

import type { DocumentStore } from '../../fsm/index.ts';
import { gatewayOf } from '../resources/address-allocator.ts';
import { networksCollection, readNetworkState } from '../resources/network-resources.ts';
import type { ContainerNetwork } from './runtime.ts';

export type TaskNetworksAnswer =
  | { ready: true; networks: ContainerNetwork[]; dns: string[] }
  | { ready: false; waiting: string };

export interface TaskNetworks {
  /** The task's attachments to `names` (in that order), or what it still waits for. */
  resolve(taskId: string, names: readonly string[]): TaskNetworksAnswer;
  /** Calls back when an answer may have changed (a network record, the overlay); returns the unsubscribe. */
  subscribe(onChange: () => void): () => void;
}

/** The node's overlay as the agent sees it: whether a network is in place here, and news when that changes. */
export interface OverlayReadiness {
  isReady(network: string): boolean;
  /**
   * The gateway address the network's Docker network has on this host, once in place: this
   * node's own gateway, except where nodes share one Docker daemon (`shoal dev`), whose network
   * has the first node's (the only one on the host, so the only DNS server containers reach).
   */
  gatewayOn(network: string): string | null;
  subscribe(onChange: () => void): () => void;
}

/** Answers from the node's applied store and, where the node runs one, its overlay agent (null: addresses are enough, as with the memory runtime). */
export class StoreTaskNetworks implements TaskNetworks {
  constructor(private readonly store: DocumentStore, private readonly nodeId: string, private readonly overlay: OverlayReadiness | null) {}

  resolve(taskId: string, names: readonly string[]): TaskNetworksAnswer {
    const { networks } = readNetworkState(this.store);
    const out: ContainerNetwork[] = [];
    const dns: string[] = [];
    for (const name of names) {
      const record = networks.get(name)?.value;
      if (record === undefined) return { ready: false, waiting: `waiting for network ${name}: it is not in this node's store` };
      const slice = record.slices[this.nodeId];
      const address = record.addresses[taskId];
      if (slice === undefined || address === undefined) return { ready: false, waiting: `waiting for network ${name}: the leader has not given this task an address yet` };
      if (this.overlay !== null && !this.overlay.isReady(name)) return { ready: false, waiting: `waiting for network ${name}: this node's overlay for it is not in place yet` };
      out.push({ name, address });
      if (dns.length === 0) dns.push(this.overlay?.gatewayOn(name) ?? gatewayOf(record.spec, slice));
    }
    return { ready: true, networks: out, dns };
  }

  subscribe(onChange: () => void): () => void {
    const offEvents = this.store.subscribe((ev) => { if (ev.collection === networksCollection) onChange(); });
    const offRestore = this.store.subscribeRestore(() => onChange());
    const offOverlay = this.overlay?.subscribe(onChange) ?? (() => undefined);
    return () => {
      offEvents();
      offRestore();
      offOverlay();
    };
  }
}
