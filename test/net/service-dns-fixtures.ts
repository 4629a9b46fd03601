// One cluster's worth of records for the service DNS tests, by hand: nodes n1 and n2; networks
// `front` (10.61.0.0/16) and `back` (10.62.0.0/16, internal; no slice on n2); services web
// (front), db (back), api (front and back), idle (front, no task).

import { DocumentStore, encodeCommand } from '../../fsm/index.ts';
import type { JsonObject } from '../../fsm/types.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../../src/resources/collections.ts';
import { networksCollection, type NetworkRecord, type NetworkState } from '../../src/resources/network-resources.ts';
import type { Versioned } from '../../src/resources/state.ts';
import { StateBuilder, serviceYaml } from '../control/state-builder.ts';

export function networkRecord(name: string, subnet: string, internal: boolean, slices: Record<string, number>, addresses: Record<string, string>): NetworkRecord {
  return { name, spec: { name, subnet, internal, slicePrefix: 24 }, slices, addresses, createdAt: 0, updatedAt: 0 };
}

export function cluster(): { control: StateBuilder; networks: NetworkRecord[] } {
  const control = new StateBuilder().node('n1').node('n2')
    .service(serviceYaml('web', 'networks: [front]'))
    .service(serviceYaml('db', 'networks: [back]'))
    .service(serviceYaml('api', 'networks: [front, back]'))
    .service(serviceYaml('idle', 'networks: [front]'))
    .placed('web1', 'web', 1, 'n1', 'running')
    .placed('web2', 'web', 2, 'n2', 'running')
    .placed('web3', 'web', 3, 'n1', 'starting')
    .placed('web4', 'web', 4, 'n1', 'running', { desired: 'shutdown' })
    .placed('web5', 'web', 5, 'n1', 'running')
    .placed('db1', 'db', 1, 'n1', 'running')
    .placed('api1', 'api', 1, 'n2', 'running');
  const networks = [
    networkRecord('front', '10.61.0.0/16', false, { n1: 0, n2: 1 }, {
      web1: '10.61.0.9', web2: '10.61.1.2', web3: '10.61.0.3', web4: '10.61.0.4', web5: '10.61.0.10', api1: '10.61.1.3',
    }),
    networkRecord('back', '10.62.0.0/16', true, { n1: 0 }, { db1: '10.62.0.2', api1: '10.62.1.2' }),
  ];
  return { control, networks };
}

export function networkState(networks: readonly NetworkRecord[], revision = 1): NetworkState {
  return { revision, networks: new Map(networks.map((n): [string, Versioned<NetworkRecord>] => [n.name, { value: n, rev: revision }])), policies: new Map() };
}

/** A real document store (the state machine) holding the records, written as committed entries. */
export class RecordStore {
  readonly store = new DocumentStore();
  private index = 0;

  put(collection: string, id: string, doc: object): void {
    this.index += 1;
    this.store.apply({ index: this.index, term: 2, data: encodeCommand({ cmd: { op: 'put', collection, id, doc: doc as JsonObject }, ts: this.index }) });
  }

  delete(collection: string, id: string): void {
    this.index += 1;
    this.store.apply({ index: this.index, term: 2, data: encodeCommand({ cmd: { op: 'delete', collection, id }, ts: this.index }) });
  }

  load(control: StateBuilder, networks: readonly NetworkRecord[]): this {
    for (const [id, n] of control.nodes) this.put(nodesCollection, id, n.value);
    for (const [id, s] of control.services) this.put(servicesCollection, id, s.value);
    for (const [id, t] of control.tasks) this.put(tasksCollection, id, t.value);
    for (const [id, s] of control.statuses) this.put(taskStatusCollection, id, s.value);
    for (const n of networks) this.put(networksCollection, n.name, n);
    return this;
  }
}
