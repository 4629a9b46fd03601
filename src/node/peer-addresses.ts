// How a node finds its members after addresses changed (docs/operations.md, "Changing
// addresses"). Three parts:
//
// - announcing: every hello this node sends names its own peer and API address (config
//   `peer.advertise` / `api.advertise`, else the listen addresses) and the peer addresses it
//   knows of (its hints and its address book);
// - learning: a member's own hello (the transport checked that the certificate names it, and
//   that it is a member of this cluster) or a probe of a hint at which its certificate answered
//   puts its address in the address book (peer-address-book.ts), which overrides the record;
// - committing: the leader proposes the addresses that differ from the records (its own, and
//   those its book learned from the members themselves), as a membership change that re-adds
//   each member as what it is (no change of configuration) with its new record in the context,
//   which is how records enter the log. Every release applies that: the context's records
//   replace the old ones, and re-adding a member is a no-op since the first release, so no
//   feature level is needed.

import { performance } from 'node:perf_hooks';
import type { Announcement } from '../../transport/handshake.ts';
import type { ConfChange, ConfState, NodeId } from '../raft/types.ts';
import type { Logger } from '../log.ts';
import { ShoalError } from '../errors.ts';
import { confChangeContext, type MemberRecord } from '../resources/membership.ts';
import { isHostPort, splitHostPort } from '../base/host-port.ts';
import { PeerAddressBook } from './peer-address-book.ts';
import { PeerHints, type ProbeOutcome } from './peer-address-hints.ts';

/** The part of the node this needs (RaftNode has it). */
export interface AddressNode {
  readonly id: NodeId;
  readonly membership: { list(): MemberRecord[]; get(id: NodeId): MemberRecord | undefined };
  readonly isLeader: boolean;
  readonly currentTerm: number;
  readonly appliedTerm: number;
  confState(): ConfState;
  changeMembership(cc: ConfChange): Promise<void>;
  /** Dial every member again at peerAddressOf(record). */
  refreshPeers(): void;
}

export interface PeerAddressesOptions {
  dataDir: string;
  /** What this node announces about itself (announcedSelf); undefined parts are not announced. Asked each time. */
  self: () => SelfAddresses;
  /** The operator's hints (`--peers`, `peer.peers`). */
  hints: readonly string[];
  /** Which node answers at an address (WsTransport.identify). */
  identify: (address: string) => Promise<NodeId>;
  log: Logger;
  /** How often hints are probed, the book reconciled and the leader's commit considered. */
  intervalMs?: number;
}

export interface SelfAddresses {
  peerAddress?: string;
  apiAddress?: string;
}

/**
 * What a node announces as its own addresses: `advertise` if set, else where it listens, unless
 * that is a wildcard (0.0.0.0, ::) or an unbound port 0 (then the peer listener's bound address).
 */
export function announcedSelf(config: { api: { listen: string; advertise?: string | undefined }; peer: { listen: string; advertise?: string | undefined } }, boundPeer: string | undefined): SelfAddresses {
  const usable = (hp: string): boolean => {
    const { host, port } = splitHostPort(hp);
    return port !== 0 && host !== '0.0.0.0' && host !== '::' && host !== '';
  };
  const peer = config.peer.advertise ?? (usable(config.peer.listen) ? config.peer.listen : boundPeer !== undefined && usable(boundPeer) ? boundPeer : undefined);
  const api = config.api.advertise ?? (usable(config.api.listen) ? config.api.listen : undefined);
  return { ...(peer !== undefined ? { peerAddress: peer } : {}), ...(api !== undefined ? { apiAddress: api } : {}) };
}

/** Hints at most in one hello (frames.ts peerHintsMax). */
const helloHintsMax = 32;

export class PeerAddresses {
  readonly book: PeerAddressBook;
  private readonly hints: PeerHints;
  private node: AddressNode | undefined;
  private timer: NodeJS.Timeout | undefined;
  private committing: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly opts: PeerAddressesOptions) {
    this.book = new PeerAddressBook(opts.dataDir, opts.log);
    this.hints = new PeerHints(opts.hints);
  }

  /** Where to dial a member: the book's address if it has one, else the record's. */
  peerAddressOf(m: MemberRecord): string {
    return this.book.get(m.id)?.peerAddress ?? m.peerAddress;
  }

  /** What this node's hellos carry. */
  announcement(): Announcement {
    const { peerAddress, apiAddress } = this.opts.self();
    const known = [...this.opts.hints, ...this.book.list().map(([, e]) => e.peerAddress)];
    const peerHints = [...new Set(known)].filter((a) => a !== peerAddress).slice(0, helloHintsMax);
    return { ...(peerAddress !== undefined ? { peerAddress } : {}), ...(apiAddress !== undefined ? { apiAddress } : {}), peerHints };
  }

  /** Starts probing hints and, on the leader, committing addresses. */
  start(node: AddressNode): void {
    this.node = node;
    if (this.opts.hints.length > 0) this.opts.log.info(`peer hints: ${this.opts.hints.join(', ')}; probing them to find the members`);
    this.tick();
    this.timer = setInterval(() => this.tick(), this.opts.intervalMs ?? 1000);
    this.timer.unref();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
  }

  /** A member's hello (transport onAnnounced): its own addresses, and places to look for others. */
  heard(id: NodeId, announced: Announcement): void {
    const node = this.node;
    if (node === undefined || this.closed || id === node.id) return;
    const m = node.membership.get(id);
    if (m === undefined) return;
    if (announced.peerAddress !== undefined && isHostPort(announced.peerAddress)) {
      const api = announced.apiAddress !== undefined && isHostPort(announced.apiAddress) ? announced.apiAddress : undefined;
      const before = this.peerAddressOf(m);
      if (this.book.learn(m, announced.peerAddress, api)) this.moved(m, before, 'its own hello');
    }
    // Addresses already dialled are known: probing them again at every hello would only cost handshakes.
    const known = new Set([this.opts.self().peerAddress, ...node.membership.list().map((r) => this.peerAddressOf(r))]);
    const hints = (announced.peerHints ?? []).filter((a) => isHostPort(a) && !known.has(a));
    if (this.hints.addFromPeer(hints) > 0) this.probeDue();
  }

  private tick(): void {
    const node = this.node;
    if (node === undefined || this.closed) return;
    if (this.book.reconcile(node.membership.list())) node.refreshPeers();
    this.probeDue();
    this.maybeCommit(node);
  }

  private probeDue(): void {
    for (const address of this.hints.due(performance.now())) {
      this.opts.identify(address).then(
        (id) => this.settled(this.hints.settle(address, performance.now(), { id })),
        (err: unknown) => this.settled(this.hints.settle(address, performance.now(), { error: (err as Error).message })),
      );
    }
  }

  private settled(o: ProbeOutcome): void {
    const node = this.node;
    if (node === undefined || this.closed) return;
    const log = this.opts.log;
    if (o.id === undefined) {
      const msg = `peer hint ${o.address}: ${o.error ?? 'no answer'}${o.givenUp === true ? '; given up' : '; will retry'}`;
      if (o.firstFailure === true) log.warn(msg);
      else log.debug(msg);
      return;
    }
    if (o.id === node.id) return;
    const m = node.membership.get(o.id);
    if (m === undefined) {
      log.warn(`peer hint ${o.address}: node ${o.id} answers there, but it is not a member of this cluster; ignored`);
      return;
    }
    const before = this.peerAddressOf(m);
    if (before === o.address) return;
    if (this.book.learn(m, o.address)) this.moved(m, before, `a probe of the hint ${o.address}`);
  }

  private moved(m: MemberRecord, before: string, how: string): void {
    const now = this.peerAddressOf(m);
    if (now === before) return;
    this.opts.log.info(`member ${m.name} (${m.id}) is at ${now}, not ${before} (from ${how}); dialling it there`);
    this.node?.refreshPeers();
  }

  /** The leader puts the addresses the members announced into their records. */
  private maybeCommit(node: AddressNode): void {
    if (!node.isLeader || node.appliedTerm !== node.currentTerm || this.committing !== undefined) return;
    const cc = addressChange(node.membership.list(), node.confState(), node.id, this.opts.self(), (id) => this.book.get(id));
    if (cc === undefined) return;
    const names = cc.records.map((r) => `${r.name} (${r.id}) peer ${r.peerAddress} api ${r.apiAddress}`).join(', ');
    this.committing = node.changeMembership(cc.change)
      .then(() => this.opts.log.info(`committed new member addresses: ${names}`))
      .catch((err: unknown) => {
        // Another membership change in flight (or the one every new leader waits for): routine.
        const pending = err instanceof ShoalError && err.details?.reason === 'confChangePending';
        this.opts.log[pending ? 'debug' : 'warn'](`committing new member addresses (${names}) failed: ${(err as Error).message}; will retry`);
      })
      .finally(() => { this.committing = undefined; });
  }
}

/**
 * The membership change that brings the records up to date, or undefined when none differs (or
 * a joint configuration is in effect, when no change may be proposed). Each changed member is
 * re-added as what it is (voter or learner), which changes no configuration. Pure; exported for
 * tests.
 */
export function addressChange(
  members: readonly MemberRecord[], cs: ConfState, selfId: NodeId, self: SelfAddresses,
  bookOf: (id: NodeId) => { peerAddress: string; apiAddress?: string } | undefined,
): { change: ConfChange; records: MemberRecord[] } | undefined {
  if (cs.votersOutgoing.length > 0 || cs.learnersNext.length > 0) return undefined;
  const records: MemberRecord[] = [];
  for (const m of members) {
    const want = m.id === selfId ? self : bookOf(m.id);
    if (want === undefined) continue;
    const peerAddress = want.peerAddress ?? m.peerAddress;
    const apiAddress = want.apiAddress ?? m.apiAddress;
    if (peerAddress === m.peerAddress && apiAddress === m.apiAddress) continue;
    if (!cs.voters.includes(m.id) && !cs.learners.includes(m.id)) continue;
    records.push({ ...m, peerAddress, apiAddress });
  }
  if (records.length === 0) return undefined;
  const changes = records.map((r) => ({ type: cs.voters.includes(r.id) ? 'addVoter' as const : 'addLearner' as const, node: r.id }));
  return { change: { changes, context: confChangeContext(records) }, records };
}
