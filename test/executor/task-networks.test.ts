// StoreTaskNetworks: a task's addresses and DNS server on its networks from the network records
// of a real document store, or what it still waits for; and its change notifications.

import { describe, expect, it } from 'vitest';
import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { JsonObject } from '../../fsm/types.ts';
import { networksCollection, type NetworkRecord } from '../../src/resources/network-resources.ts';
import { StoreTaskNetworks, type OverlayReadiness } from '../../src/executor/task-networks.ts';

let index = 0;
function put(store: DocumentStore, collection: string, id: string, doc: object): void {
  index += 1;
  store.apply({ index, term: 2, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: index }) });
}

const record = (name: string, subnet: string, slices: Record<string, number>, addresses: Record<string, string>): NetworkRecord => ({
  name, spec: { name, subnet, internal: false, slicePrefix: 24 }, slices, addresses, createdAt: 0, updatedAt: 0,
});

class Readiness implements OverlayReadiness {
  ready = new Set<string>();
  /** Gateways of Docker networks another node of a shared daemon made. */
  gateways = new Map<string, string>();
  listeners = new Set<() => void>();
  isReady(network: string): boolean {
    return this.ready.has(network);
  }
  gatewayOn(network: string): string | null {
    return this.ready.has(network) ? (this.gateways.get(network) ?? null) : null;
  }
  subscribe(onChange: () => void): () => void {
    this.listeners.add(onChange);
    return () => this.listeners.delete(onChange);
  }
}

describe('StoreTaskNetworks', () => {
  it('answers the addresses in the order asked, with the first network\'s gateway of this node\'s slice as DNS, once all are there', () => {
    const store = new DocumentStore();
    const overlay = new Readiness();
    const networks = new StoreTaskNetworks(store, 'n1', overlay);
    expect(networks.resolve('t1', ['back'])).toEqual({ ready: false, waiting: 'waiting for network back: it is not in this node\'s store' });
    put(store, networksCollection, 'back', record('back', '10.62.0.0/16', { n1: 3 }, {}));
    expect(networks.resolve('t1', ['back'])).toEqual({ ready: false, waiting: 'waiting for network back: the leader has not given this task an address yet' });
    put(store, networksCollection, 'back', record('back', '10.62.0.0/16', { n1: 3 }, { t1: '10.62.3.2' }));
    put(store, networksCollection, 'front', record('front', '10.63.0.0/16', { n1: 0 }, { t1: '10.63.0.7' }));
    expect(networks.resolve('t1', ['back', 'front'])).toEqual({ ready: false, waiting: 'waiting for network back: this node\'s overlay for it is not in place yet' });
    overlay.ready.add('back');
    overlay.ready.add('front');
    expect(networks.resolve('t1', ['back', 'front'])).toEqual({
      ready: true, networks: [{ name: 'back', address: '10.62.3.2' }, { name: 'front', address: '10.63.0.7' }], dns: ['10.62.3.1'],
    });
    // On a Docker daemon nodes share (shoal dev), the DNS server is the gateway the network has on the host.
    overlay.gateways.set('back', '10.62.0.1');
    expect(networks.resolve('t1', ['back', 'front'])).toMatchObject({ ready: true, dns: ['10.62.0.1'] });
    // Without an overlay (the memory runtime) the addresses are enough.
    expect(new StoreTaskNetworks(store, 'n1', null).resolve('t1', ['front'])).toMatchObject({ ready: true, dns: ['10.63.0.1'] });
  });

  it('tells of changes to network records and to the overlay, and of nothing else', () => {
    const store = new DocumentStore();
    const overlay = new Readiness();
    let told = 0;
    const off = new StoreTaskNetworks(store, 'n1', overlay).subscribe(() => { told++; });
    put(store, 'notes', 'x', { a: 1 });
    expect(told).toBe(0);
    put(store, networksCollection, 'back', record('back', '10.62.0.0/16', {}, {}));
    expect(told).toBe(1);
    for (const l of overlay.listeners) l();
    expect(told).toBe(2);
    off();
    put(store, networksCollection, 'back', record('back', '10.62.0.0/16', { n1: 0 }, {}));
    expect(overlay.listeners.size).toBe(0);
    expect(told).toBe(2);
  });
});
