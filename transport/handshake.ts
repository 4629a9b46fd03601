// The handshake: the first frame each way is a hello. Refusals close the WebSocket with a
// private-range close code (4000-4999) and a short reason name, so the refused side can log
// why without parsing prose, and both sides log the details.

import type { NodeId } from '../src/raft/types.ts';
import type { HelloFrame } from './frames.ts';

export const REFUSAL_CODES = {
  /** The peer belongs to another cluster (another cluster id). */
  cluster_mismatch: 4001,
  /** The peer speaks a protocol version outside our supported range. */
  protocol_unsupported: 4002,
  /** The node id the peer claims is not the one its certificate names (or it names none). */
  node_id_mismatch: 4003,
  /** The first frame was not a valid hello, or a frame came before the hello. */
  bad_handshake: 4004,
  /** No hello within the handshake timeout. */
  handshake_timeout: 4005,
  /** We dialled an address for node X and reached node Y. */
  unexpected_peer: 4006,
  /** The certificate is valid but the node is not allowed in (`authorizePeer` said no). */
  peer_not_authorized: 4007,
  /** A newer connection from the same node replaced this one. */
  superseded: 4008,
} as const;

export type RefusalReason = keyof typeof REFUSAL_CODES;

export interface Refusal {
  reason: RefusalReason;
  /** A sentence for the log, naming both sides' values. */
  detail: string;
}

/** 1001 "going away": the standard code for a node that is shutting down. */
export const CLOSE_GOING_AWAY = 1001;

const REASON_BY_CODE: ReadonlyMap<number, RefusalReason> = new Map(
  Object.entries(REFUSAL_CODES).map(([reason, code]) => [code, reason as RefusalReason]),
);

export function refusalReasonOf(code: number): RefusalReason | undefined {
  return REASON_BY_CODE.get(code);
}

/** What this node is and accepts. */
export interface LocalIdentity {
  nodeId: NodeId;
  clusterId: string;
  protocolVersion: number;
  protocolVersionsSupported: { min: number; max: number };
  softwareVersion: string;
}

export function helloOf(local: LocalIdentity): HelloFrame {
  return {
    t: 'hello',
    clusterId: local.clusterId,
    nodeId: local.nodeId,
    protocolVersion: local.protocolVersion,
    protocolMin: local.protocolVersionsSupported.min,
    protocolMax: local.protocolVersionsSupported.max,
    softwareVersion: local.softwareVersion,
  };
}

/**
 * Checks a peer's hello against this node and the peer's certificate. `expectedNodeId` is set
 * on the dialling side: the node the address was supposed to reach. Returns null to accept.
 */
export function checkHello(hello: HelloFrame, local: LocalIdentity, certNodeId: NodeId, expectedNodeId?: NodeId): Refusal | null {
  if (hello.clusterId !== local.clusterId) {
    return { reason: 'cluster_mismatch', detail: `peer is in cluster '${hello.clusterId}', this node in '${local.clusterId}'` };
  }
  const { min, max } = local.protocolVersionsSupported;
  if (hello.protocolVersion < min || hello.protocolVersion > max) {
    return {
      reason: 'protocol_unsupported',
      detail: `peer speaks protocol ${hello.protocolVersion} (software ${hello.softwareVersion}), this node supports ${min}..${max}`,
    };
  }
  if (hello.nodeId !== certNodeId) {
    return { reason: 'node_id_mismatch', detail: `peer claims to be '${hello.nodeId}' but its certificate names '${certNodeId}'` };
  }
  if (expectedNodeId !== undefined && hello.nodeId !== expectedNodeId) {
    return { reason: 'unexpected_peer', detail: `dialled node '${expectedNodeId}' but reached '${hello.nodeId}'` };
  }
  if (hello.nodeId === local.nodeId) {
    return { reason: 'unexpected_peer', detail: `peer claims this node's own id '${local.nodeId}'` };
  }
  return null;
}
