// Networks and firewall policies as records of the store, in reserved collections (as services:
// written only through the typed routes and `apply`, and by the leader's allocator).
//
// A NetworkRecord holds the network's whole address allocation (each node's slice and each
// task's address) in the one document, so the allocator's write is one compare-and-set: two
// leaders, or a leader and an apply, can never hand out one address twice.

import { z } from 'zod';
import type { DocumentStore } from '../../fsm/index.ts';
import { firewallPolicySpecSchema, networkSpecSchema, type FirewallPolicySpec, type NetworkSpec } from './spec/network-spec.ts';
import type { Assert, Same } from './spec/service-spec.ts';
import { allDocs, type Versioned } from './state.ts';

/** Network records (NetworkRecord), by network name. */
export const networksCollection = 'shoal.networks';
/** Firewall policy records (FirewallPolicyRecord), by policy name. */
export const firewallPoliciesCollection = 'shoal.firewall-policies';

export interface NetworkRecord {
  name: string;
  spec: NetworkSpec;
  /** Node id to the index of its slice of the subnet (address-allocator.ts); written by the leader. */
  slices: Record<string, number>;
  /** Task id to its address on this network; written by the leader. */
  addresses: Record<string, string>;
  createdAt: number;
  updatedAt: number;
}

export interface FirewallPolicyRecord {
  name: string;
  spec: FirewallPolicySpec;
  createdAt: number;
  updatedAt: number;
}

export const networkRecordSchema = z.object({
  name: z.string(),
  spec: networkSpecSchema,
  slices: z.record(z.string(), z.number().int().min(0)),
  addresses: z.record(z.string(), z.string()),
  createdAt: z.number(),
  updatedAt: z.number(),
}).strict();

export const firewallPolicyRecordSchema = z.object({
  name: z.string(),
  spec: firewallPolicySpecSchema,
  createdAt: z.number(),
  updatedAt: z.number(),
}).strict();

export type _NetworkRecordMatchesSchema = Assert<Same<z.infer<typeof networkRecordSchema>, NetworkRecord>>;
export type _PolicyRecordMatchesSchema = Assert<Same<z.infer<typeof firewallPolicyRecordSchema>, FirewallPolicyRecord>>;

export interface NetworkState {
  revision: number;
  networks: ReadonlyMap<string, Versioned<NetworkRecord>>;
  policies: ReadonlyMap<string, Versioned<FirewallPolicyRecord>>;
}

function readAll<T>(store: DocumentStore, collection: string, schema: z.ZodType<T>, onMalformed: (id: string, problem: string) => void): Map<string, Versioned<T>> {
  const out = new Map<string, Versioned<T>>();
  for (const doc of allDocs(store, collection)) {
    const parsed = schema.safeParse(doc.doc);
    if (parsed.success) out.set(doc.id, { value: parsed.data, rev: doc.rev });
    else onMalformed(doc.id, parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  }
  return out;
}

/** Every network and policy of a node's applied store, each with its revision; a malformed record is skipped and reported. */
export function readNetworkState(store: DocumentStore, onMalformed: (collection: string, id: string, problem: string) => void = () => undefined): NetworkState {
  return {
    revision: store.revision,
    networks: readAll(store, networksCollection, networkRecordSchema, (id, p) => onMalformed(networksCollection, id, p)),
    policies: readAll(store, firewallPoliciesCollection, firewallPolicyRecordSchema, (id, p) => onMalformed(firewallPoliciesCollection, id, p)),
  };
}
