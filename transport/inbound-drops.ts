// Why a message from a peer was dropped before it reached the consensus core, and the counters
// of those drops by reason. The reasons are a closed list: they are the `reason` label of the
// metric shoal_peer_messages_dropped_total, whose label values must stay few.

export const INBOUND_DROP_REASONS = [
  /** Not msgpack, not a frame of the shape frames.ts defines, a text frame, or a batch on a protocol 1 connection. */
  'malformed',
  /** A frame the connection does not carry: a hello after the handshake, a snapshot ack to a listener, ... */
  'unexpected_frame',
  /** `from` is not the node the connection's certificate names. */
  'wrong_sender',
  /** `to` is not this node. */
  'misaddressed',
  /** A term no correct sender puts on a message of that type (check-message.ts). */
  'bad_term',
  /** Entries where the type carries none, a proposal without entries, an append whose entries do not follow on. */
  'bad_entries',
  /** A snapshot missing from 'snap' or present elsewhere, or metadata that cannot be (index 0, overlapping roles, ...). */
  'bad_snapshot',
  /** A context longer than any the core produces. */
  'bad_context',
  /** A snapshot stream that broke its own rules: over the size limit, chunks out of order, opened by another type. */
  'bad_snapshot_stream',
  /** The node refused the snapshot's payload: it does not decode (the node's message handler said so). */
  'bad_snapshot_data',
] as const;

export type InboundDropReason = (typeof INBOUND_DROP_REASONS)[number];

/** A message refused, by the transport's checks or by the node's message handler. */
export interface MessageRefusal {
  reason: InboundDropReason;
  /** One line for the log; never a metric label. */
  detail: string;
}

/** Name and help of the metric a node publishes from `Transport.inboundDrops()`. */
export const PEER_MESSAGES_DROPPED_METRIC = {
  name: 'shoal_peer_messages_dropped_total',
  help: 'Messages from peers dropped before they reached the consensus core, by reason (docs/architecture.md, "What a peer may send").',
} as const;

export type InboundDropCounts = Readonly<Record<InboundDropReason, number>>;

export class InboundDropCounter {
  private readonly counts: Record<InboundDropReason, number> = zeroCounts();

  count(reason: InboundDropReason): void {
    this.counts[reason]++;
  }

  /** A copy; every reason is present, with 0 when nothing was dropped for it. */
  snapshot(): InboundDropCounts {
    return { ...this.counts };
  }
}

/**
 * The samples of PEER_MESSAGES_DROPPED_METRIC, one per reason (zeros included, so the series
 * exist from the start), in the shape of the node's metric registry (src/base/metrics.ts).
 */
export function inboundDropSamples(counts: InboundDropCounts): { labels: { reason: string }; value: number }[] {
  return INBOUND_DROP_REASONS.map((reason) => ({ labels: { reason }, value: counts[reason] }));
}

function zeroCounts(): Record<InboundDropReason, number> {
  return Object.fromEntries(INBOUND_DROP_REASONS.map((r) => [r, 0])) as Record<InboundDropReason, number>;
}
