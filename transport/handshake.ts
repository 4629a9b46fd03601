// The handshake: the first frame each way is a hello. Refusals close the WebSocket with a
// private-range close code (4000-4999) and a short reason name, so the refused side can log
// why without parsing prose, and both sides log the details.

import type { NodeId } from '../src/raft/types.ts';
import { peerHintsMax, type HelloFrame } from './frames.ts';

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
  /** The certificate is valid but the node is not a member (not added yet, or never was). */
  peer_not_authorized: 4007,
  /** A newer connection from the same node replaced this one. */
  superseded: 4008,
  /**
   * The node was removed from the cluster (a committed conf change); it must stop, and may only
   * come back as a new node. The refused side believes it at once: ids are never reused.
   */
  removed: 4009,
  /**
   * The peer's certificate serial is on the cluster's deny-list (src/security/revoked-serials.ts).
   * The refused side does not stop: it is cut off until it has a certificate that is not revoked.
   */
  revoked: 4010,
} as const;

/** What the owner of a transport says about a peer whose certificate is valid. */
export type PeerAuthorization = 'member' | 'not_member' | 'removed';

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
  /** The newest version this node speaks; a connection uses it when the peer accepts it. */
  protocolVersion: number;
  protocolVersionsSupported: { min: number; max: number };
  softwareVersion: string;
  /** The highest cluster feature level this node can apply; sent in the hello. */
  featureLevelMax?: number;
  /** What this node announces in each hello: its own addresses and hints (asked at every hello: they change). */
  announce?: () => Announcement;
}

/** A node's own addresses and the peer addresses it knows of, as its hello carries them (frames.ts). */
export interface Announcement {
  peerAddress?: string;
  apiAddress?: string;
  peerHints?: string[];
}

// Version negotiation. The dialler speaks first, before it knows whom it reached, so its hello
// offers the oldest version it supports (`protocolVersion` = its min) and its range. The
// listener answers with the version the connection will use: the newest both support. Both
// ends of the connection then hold the same number (the listener's answer). A node of the
// first release checks only that the peer's `protocolVersion` lies in its own range, and a
// newer node's offer (its min) and answer (at most the dialler's max) both do, so nodes of
// adjacent releases connect during a rolling upgrade.

/** The dialler's hello: the offer. */
export function offerOf(local: LocalIdentity): HelloFrame {
  return helloOf(local, local.protocolVersionsSupported.min);
}

/** The listener's hello: the answer, naming the version agreed by `agreedVersion`. */
export function answerOf(local: LocalIdentity, agreed: number): HelloFrame {
  return helloOf(local, agreed);
}

function helloOf(local: LocalIdentity, protocolVersion: number): HelloFrame {
  return {
    t: 'hello',
    clusterId: local.clusterId,
    nodeId: local.nodeId,
    protocolVersion,
    protocolMin: local.protocolVersionsSupported.min,
    protocolMax: local.protocolVersionsSupported.max,
    softwareVersion: local.softwareVersion,
    ...(local.featureLevelMax !== undefined ? { featureLevelMax: local.featureLevelMax } : {}),
    ...announcementOf(local),
  };
}

function announcementOf(local: LocalIdentity): Announcement {
  const a = local.announce?.();
  if (a === undefined) return {};
  return {
    ...(a.peerAddress !== undefined ? { peerAddress: a.peerAddress } : {}),
    ...(a.apiAddress !== undefined ? { apiAddress: a.apiAddress } : {}),
    ...(a.peerHints !== undefined && a.peerHints.length > 0 ? { peerHints: a.peerHints.slice(0, peerHintsMax) } : {}),
  };
}

/** On the listening side: the newest version both sides support, or null when none is. */
export function agreedVersion(offer: HelloFrame, local: LocalIdentity): number | null {
  const v = Math.min(local.protocolVersion, offer.protocolMax);
  return v >= local.protocolVersionsSupported.min && v >= offer.protocolMin ? v : null;
}

/**
 * Checks a peer's hello against this node and the peer's certificate. `expectedNodeId` is set
 * on the dialling side, where the hello is the listener's answer (the node the address was
 * supposed to reach); unset, the hello is a dialler's offer. Returns null to accept.
 */
export function checkHello(hello: HelloFrame, local: LocalIdentity, certNodeId: NodeId, expectedNodeId?: NodeId): Refusal | null {
  if (hello.clusterId !== local.clusterId) {
    return { reason: 'cluster_mismatch', detail: `peer is in cluster '${hello.clusterId}', this node in '${local.clusterId}'` };
  }
  const versionRefusal = expectedNodeId === undefined ? checkOffer(hello, local) : checkAnswer(hello, local);
  if (versionRefusal !== null) return versionRefusal;
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

function checkOffer(offer: HelloFrame, local: LocalIdentity): Refusal | null {
  if (agreedVersion(offer, local) !== null) return null;
  const { min, max } = local.protocolVersionsSupported;
  return {
    reason: 'protocol_unsupported',
    detail: `peer speaks protocol ${offer.protocolMin}..${offer.protocolMax} (software ${offer.softwareVersion}), this node supports ${min}..${max}`,
  };
}

function checkAnswer(answer: HelloFrame, local: LocalIdentity): Refusal | null {
  const { min, max } = local.protocolVersionsSupported;
  if (answer.protocolVersion >= min && answer.protocolVersion <= max) return null;
  return {
    reason: 'protocol_unsupported',
    detail: `peer answered with protocol ${answer.protocolVersion} (software ${answer.softwareVersion}), this node supports ${min}..${max}`,
  };
}
