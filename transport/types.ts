// The port between the node driver and the network. Two implementations: the real one
// (ws-transport.ts: WebSocket over mutual TLS) and the in-memory one with fault injection
// (memory-transport.ts) that tests and the simulator drive.

import type { Message, NodeId } from '../src/raft/types.ts';
import type { InboundDropCounts, MessageRefusal } from './inbound-drops.ts';

export type { InboundDropCounts, InboundDropReason, MessageRefusal } from './inbound-drops.ts';

export interface PeerInfo {
  id: NodeId;
  /** host:port of the peer's transport listener ("[v6]:port" for IPv6). */
  address: string;
}

export interface PeerStats {
  id: NodeId;
  /** An outbound connection to the peer has completed its handshake. */
  connected: boolean;
  /** The latest measured round-trip time; null until one was measured. */
  rttMs: number | null;
  /** Messages (and snapshots) waiting to be written to the peer. */
  queued: number;
  /** Messages given to `send` that will never be written (queue full, peer removed, too large, ...). */
  dropped: number;
  /** Messages written to the peer. */
  sent: number;
  /** Messages received from the peer and handed to the message handler. */
  received: number;
  /**
   * WebSocket messages that arrived from the peer after its hello, valid or not (ws transport
   * only). Below `received` when the peer coalesces messages (protocol 2).
   */
  wsMessagesReceived?: number;
  /** From the peer's handshake, once one completed. */
  softwareVersion?: string;
  protocolVersion?: number;
  /** The highest cluster feature level the peer can apply; absent from first-release peers (level 1). */
  featureLevelMax?: number;
}

/**
 * How this node's outbound connection to a peer stands: open ('connected'), or what the last
 * attempt came to. 'refused': the peer's kernel answered the dial with a reset, so the machine
 * is up and nothing listens on the peer port (shoal is not running there). 'silent': nothing
 * answered (a dial that timed out or found no route, a dial unanswered past a round trip, an
 * open connection torn down for silence): the machine or the path to it is gone. 'closed': an
 * open connection closed, or a dial failed otherwise. 'unknown': never dialled.
 */
export type PeerLinkCondition = 'connected' | 'refused' | 'closed' | 'silent' | 'unknown';

/** What this node's transport knows of a peer being there (node health's evidence, docs/control-plane.md). */
export interface PeerContact {
  /** Ms since anything arrived from the peer on either connection (a frame, a ping, a pong); undefined: nothing since the transport started. */
  heardAgoMs: number | undefined;
  /** Ms since the transport started: how long it has been listening for the peer. */
  watchingForMs: number;
  link: PeerLinkCondition;
  /**
   * The peer closed a connection saying it is going away (WebSocket close code 1001, which a
   * transport sends on every connection as it stops: a graceful stop, an upgrade's restart), and
   * nothing arrived from it since.
   */
  goodbye: boolean;
  /**
   * A dial to the peer was refused (its machine is up, shoal is not running there) and nothing
   * arrived from it since. Only hearing from it clears this: the dials after a refusal may hang
   * while a restarted shoal starts (it listens a while before it answers the handshake), and
   * `link` then reads 'silent'.
   */
  refused: boolean;
  /**
   * The peer's wall clock minus this node's, ms (positive: the peer is ahead), estimated from the
   * pongs of the outbound link (clock-offset.ts). Absent until one came from a peer that says its
   * clock (a first-release peer never does).
   */
  clockOffsetMs?: number;
  /** Ms since the newest sample of clockOffsetMs (present with it): an old one is of a link now down. */
  clockSampledAgoMs?: number;
}

/**
 * How a peer turned out unreachable. 'disconnected': the connection to it closed (a killed
 * process closes its connections at once), so it is probably gone. 'dropped': a message to it
 * was dropped (a full queue, a frame over the limit, a peer not known) while nothing says it is
 * down.
 */
export type UnreachableReason = 'disconnected' | 'dropped';

/**
 * Takes a message from a peer. It may refuse it by returning why (the node refuses a snapshot
 * whose payload does not decode): the transport counts the refusal with its own drops, and a
 * refused snapshot is reported failed to its sender.
 */
export type MessageHandler = (m: Message) => MessageRefusal | undefined | void;

/**
 * What a peer may send, and who checks it (docs/architecture.md, "What a peer may send"). A
 * message reaches the message handler only after, in order:
 *
 * 1. its shape: msgpack, then frames.ts's schema (validate-message.ts for 'msg' frames): known
 *    types and fields, integers that are safe and not negative, ids of at most 256 characters;
 * 2. its addressing: `from` is the node the connection's certificate names, `to` is this node;
 * 3. its meaning (check-message.ts): the rules every message a correct node sends obeys,
 *    whatever the receiver's state (terms, entries that follow on, a possible snapshot).
 *
 * A message that fails any of them is dropped, never handed on, and counted by reason
 * (`inboundDrops()`); a log line says why, at most once a minute per peer and kind. Rules that
 * need the receiver's state are the consensus core's, which ignores such messages; the node's
 * handler refuses a snapshot whose payload does not decode (src/node/snapshot-data.ts).
 *
 * Handlers are never called from inside `send`, `setPeers` or `close` (always from a later
 * task), so a driver may call `send` while it holds its own state mid-update. No handler is
 * called after `close()` resolved.
 */
export interface Transport {
  /** Listen (real) or register (memory); resolves when ready. */
  start(): Promise<void>;
  /** Where it listens (host:port, with port 0 resolved). Only valid after `start()`. */
  readonly address: string;
  /** Connect to new peers, drop removed ones, reconnect to peers whose address changed. */
  setPeers(peers: PeerInfo[]): void;
  /** Never throws for a down peer or a full queue: drops, counts, and calls the unreachable handler. */
  send(m: Message): void;
  onMessage(h: MessageHandler): void;
  /** A peer could not be reached; `why` says how (see UnreachableReason). */
  onUnreachable(h: (id: NodeId, why: UnreachableReason) => void): void;
  /** A 'snap' message finished streaming and the peer took it (ok), or failed to. */
  onSnapshotStatus(h: (id: NodeId, ok: boolean) => void): void;
  /**
   * Optional: a peer refused this node's handshake, with the reason's name (transport/handshake.ts
   * REFUSAL_CODES). The node stops when the reason is 'removed'.
   */
  onRefused?(h: (id: NodeId, reason: string) => void): void;
  stats(): PeerStats[];
  /** Optional: what the transport knows of the peer being there (the in-memory transport has no sockets to tell). */
  contact?(id: NodeId): PeerContact;
  /**
   * Messages from peers dropped before the handler took them, by reason, since start (every
   * reason present). The node publishes them as shoal_peer_messages_dropped_total{reason}
   * (inbound-drops.ts: PEER_MESSAGES_DROPPED_METRIC, inboundDropSamples).
   */
  inboundDrops(): InboundDropCounts;
  /** Idempotent; drains nothing, closes sockets. */
  close(): Promise<void>;
}

/** What the transports log through: the process's one Logger (src/log.ts); the driver passes its own. */
export type { Logger as TransportLogger } from '../src/log.ts';
