// What the scenarios need from a three-node cluster under test. shoal and etcd each implement it
// once (shoal-cluster.ts, etcd-cluster.ts); everything else in the benchmark is shared, so both
// systems see the same load generator, the same routing and the same checks.

import type { Answer, Client, Endpoint, RequestSpec } from './http.ts';

export type SystemKind = 'shoal' | 'etcd';

/** Raft timing, identical for both systems in a run. */
export interface Timeouts {
  heartbeatMs: number;
  electionMs: number;
}

export interface BenchNode {
  readonly name: string;
  readonly client: Endpoint;
  /** The process id while the node runs. */
  readonly pid: number | undefined;
}

export interface RejoinReport {
  /** From the wiped node being started (after any membership calls) until it applied as far as the leader. */
  catchUpMs: number;
  /** Membership calls before the start (member remove + member add). */
  membershipMs: number;
  /** From the start until the node's API first answered (process start-up). */
  startMs: number;
  /** How the node caught up, from its log (e.g. "snapshot at index 100012"). */
  how: string;
}

export interface System {
  readonly kind: SystemKind;
  readonly nodes: readonly BenchNode[];
  /** Creates the data directories, starts the three nodes and waits until they agree on a leader. */
  start(): Promise<void>;
  /** Stops every node (SIGTERM, then SIGKILL after a grace period) and removes the data. Idempotent. */
  destroy(): Promise<void>;
  /** Index of the node that every running node names as leader; undefined while they disagree. */
  leader(): Promise<number | undefined>;
  /** Writes a 256-byte value under (collection, id). */
  writeRequest(collection: string, id: string, value: string): RequestSpec;
  /** A linearizable read of (collection, id). */
  readRequest(collection: string, id: string): RequestSpec;
  writeAccepted(a: Answer): boolean;
  /** True when the read succeeded and found the key. */
  readFound(a: Answer): boolean;
  /** The value stored under (collection, id) as node `client` serves it; undefined when absent. */
  readValue(client: Client, collection: string, id: string): Promise<string | undefined>;
  /** Moves leadership to node i (shoal: POST /v1/cluster/leader; etcd: move-leader); resolves once it leads. */
  transferLeader(i: number): Promise<void>;
  /** kill -9 of node i. */
  kill(i: number): Promise<void>;
  /** Starts node i again on its data (after kill); resolves once it has applied as far as the leader. */
  restart(i: number, timeoutMs: number): Promise<void>;
  /** The applied index (shoal) or store revision (etcd) node i reports for itself. */
  appliedOf(i: number): Promise<number>;
  /** Stops node i, deletes its data and brings it back empty; returns once it has caught up with the leader. */
  wipeAndRejoin(i: number, timeoutMs: number): Promise<RejoinReport>;
}
