// What the client API is built from (the node, its store, its security material, the optional
// parts a node may lack) and what every route plugin is registered with. In a file of its own so
// that the plugins and the app that registers them do not import each other.

import type { ClockReport } from '../node/clock-watch.ts';
import type { DocumentStore } from '../../fsm/index.ts';
import type { Registry } from '../base/metrics.ts';
import type { Runtime } from '../executor/runtime.ts';
import type { DrillTarget } from '../node/drill/drill-actions.ts';
import type { EventLog } from '../node/events/event-log.ts';
import type { UpgradeHost } from '../node/upgrade/upgrade-host.ts';
import type { ClusterNode } from './cluster-node.ts';
import type { CaAuthority } from '../security/authority.ts';
import type { ClusterKeyHolder, NodeKeyLock } from '../ports/cluster-keys.ts';
import type { FoundingToken } from '../security/founding-token.ts';
import type { ApiBounds } from './api-metrics.ts';
import type { ApiAuth } from './auth.ts';
import type { ApiLimits } from './limits.ts';
import type { PeerHttp } from './peer-http.ts';
import type { RouteTable } from './route-table.ts';
import type { BackupRunner } from '../node/backup/backup-runner.ts';
import type { VolumeEngine } from '../executor/volumes/volume-engine.ts';

/** This node's WireGuard keys, for POST /v1/mesh/rotate-key (mesh-routes.ts). */
export interface MeshKeys {
  /** Makes, commits, stores and gives the interface a new key pair; resolves with the new public key. */
  rotateKey(): Promise<string>;
}

/** Where this node keeps the CA keys, for a CA rotation (ca-routes.ts). */
export interface CaRotationPort {
  dataDir: string;
}

export interface ApiContext {
  node: ClusterNode;
  store: DocumentStore;
  clusterId: string;
  softwareVersion: string;
  bodyBytesMax: number;
  proposalTimeoutMs: number;
  metrics: Registry;
  /** The API's bounds; apiLimitsDefault when absent or for each field left out. */
  limits?: Partial<ApiLimits>;
  /** Closers for long-lived responses (watch and log streams), run when the server closes. */
  streams: Set<() => void>;
  /** This node's container runtime, for task logs; absent or null when it runs no workloads. */
  runtime?: Runtime | null;
  /** The cluster's events (GET /v1/events); absent, the route is not served. */
  events?: EventLog;
  /** The cluster CA as this node holds it (join tokens, joins); absent, those routes answer ca_key_unavailable. */
  security?: CaAuthority;
  /** The token `shoal init` printed, while this node has not yet written its record (joins with it wait). */
  foundingToken?: FoundingToken;
  /** How callers authenticate: HTTPS with the node certificate, or the explicit insecure loopback mode. */
  auth: ApiAuth;
  /** Calls to other nodes' APIs (over TLS with this node's certificate unless insecure). */
  peer: PeerHttp;
  /** This node's WireGuard keys (POST /v1/mesh/rotate-key); absent when it takes no part in the mesh. */
  mesh?: MeshKeys;
  /** What this node knows of the members' clocks and the jobs' clock rule (src/node/clock-watch.ts): GET /v1/jobs `clock`; absent, left out. */
  jobClock?: () => ClockReport;
  /** Renews this node's certificate now (src/security/renewal.ts); absent, POST /v1/certificates/renew is refused. */
  renewCertificate?: () => Promise<void>;
  /**
   * Tells of each change of this node's TLS material (a renewal, a CA rotation's new trust bundle);
   * returns the unsubscribe. The API closes the connections of certificates the bundle no longer
   * trusts (cert-routes.ts). Absent, the bundle never changes.
   */
  onTlsReloaded?: (listener: () => void) => () => void;
  /** Where this node keeps the CA keys, for a CA rotation (ca-routes.ts); absent, those routes are refused. */
  caRotation?: CaRotationPort;
  /** What POST /v1/drill/actions acts on (this node's process); absent, the actions are refused. */
  drill?: DrillTarget;
  /** This node's releases folder and restart (the /v1/upgrade routes); absent, they are refused. */
  upgrade?: UpgradeHost;
  /** The cluster keys this node holds (voters; src/security/cluster-key-files.ts); absent, it hands out no key. */
  clusterKeys?: ClusterKeyHolder;
  /** Autolock on this node (src/security/node-lock.ts); absent, its keys are in memory only (tests). */
  nodeLock?: NodeKeyLock;
  /** Takes backups to the targets in the store (src/node/backup/); absent, POST /v1/backups and the reads of a target are refused. */
  backups?: BackupRunner;
  /** This node's replicated volumes (src/executor/volumes/, issue 41): it receives increments into them; absent, it refuses them. */
  volumes?: VolumeEngine;
}

/** What every plugin is registered with. */
export interface ApiPluginOptions {
  ctx: ApiContext;
  limits: ApiLimits;
  bounds: ApiBounds;
  /** Every route with its methods and declared role (the OpenAPI document names the roles). */
  routes: RouteTable;
}
