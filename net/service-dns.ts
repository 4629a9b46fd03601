// The service DNS responder of one node (docs/network.md, "Service discovery"): on each network
// this node has a slice of, it answers on the node's gateway address of that network, port 53,
// which is the DNS server the node's containers on that network are given. It names the
// services of the asking network from the node's applied (committed) store (dns-view.ts,
// dns-answers.ts) and forwards other names to the host's resolvers (dns-forward.ts).
//
// A level-triggered loop like the firewall's: on a change of the networks (coalesced) and every
// `passIntervalMs`, it opens the sockets of networks it has a gateway on and closes those of
// networks it no longer has. A bind fails with EADDRNOTAVAIL until the network's bridge exists
// on the host: it is tried again on the next pass, and logged only when the state changes.
// Closing the responder closes its sockets; containers then get no answer until it is back.

import type { DocumentStore } from '../fsm/index.ts';
import { networksCollection, readNetworkState } from '../src/resources/network-resources.ts';
import { nodesCollection, servicesCollection, taskStatusCollection, tasksCollection } from '../src/resources/collections.ts';
import { ControlStateReader } from '../src/resources/state.ts';
import { cidrContains, cidrOf, parseAddress } from '../src/resources/address-cidr.ts';
import { decide } from './dns-answers.ts';
import { DnsForwarder, forwardTimeoutMsDefault, forwardsInflightMaxDefault, type Transport } from './dns-forward.ts';
import { openListener, type DnsListener } from './dns-listener.ts';
import { dnsCounts, type DnsCounts, type DnsResult } from './dns-metrics.ts';
import { headerOnly, readQuery, reply, servfail, tcpBytesMax, udpBytesFor } from './dns-reply.ts';
import { resolvConfUpstreams, type Upstream } from './dns-upstreams.ts';
import { dnsView, type DnsView } from './dns-view.ts';

export interface ServiceDnsOptions {
  /** The node's applied store. */
  store: DocumentStore;
  nodeId: string;
  log: { info(msg: string): void; warn(msg: string): void };
  counts?: DnsCounts;
  /** 53; tests take another (and any port with 0). */
  port?: number;
  /** Where to listen for a network, given its gateway; the gateway itself by default (tests map it to loopback). */
  bindAddress?: (network: string, gateway: string) => string;
  /**
   * Whether to answer an asker: by default only addresses inside the asking network's subnet (its
   * containers, and the gateway itself when Docker's resolver forwards from the host), so the
   * responder is never an open resolver for whoever can route to a gateway. Tests on loopback take all.
   */
  acceptFrom?: (network: string, address: string) => boolean;
  /** The host's resolvers, from /etc/resolv.conf by default. */
  upstreams?: () => readonly Upstream[];
  forwardTimeoutMs?: number;
  forwardsInflightMax?: number;
  passIntervalMs?: number;
}

export const dnsPort = 53;
/** How often sockets not yet bound are tried again. */
export const passIntervalMsDefault = 2_000;
/** Network changes arriving within this window make one pass. */
export const coalesceMs = 50;

const viewCollections: ReadonlySet<string> = new Set([networksCollection, servicesCollection, tasksCollection, taskStatusCollection, nodesCollection]);

export class ServiceDns {
  private readonly listeners = new Map<string, DnsListener>();
  /** Per network, what was last logged of it, so a retried failure is logged once. */
  private readonly logged = new Map<string, string>();
  private readonly reader: ControlStateReader;
  private readonly forwarder: DnsForwarder;
  readonly counts: DnsCounts;
  private cached: DnsView | null = null;
  private unsubscribe: (() => void)[] = [];
  private interval: NodeJS.Timeout | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly o: ServiceDnsOptions) {
    this.reader = new ControlStateReader(o.store);
    this.counts = o.counts ?? dnsCounts();
    const upstreams = o.upstreams ?? resolvConfUpstreams();
    // Never forward to itself (a resolv.conf naming a gateway would loop).
    const own = (u: Upstream): boolean => [...this.listeners.values()].some((l) => l.address === u.host && l.port === u.port);
    this.forwarder = new DnsForwarder({
      upstreams: () => upstreams().filter((u) => !own(u)),
      timeoutMs: o.forwardTimeoutMs ?? forwardTimeoutMsDefault,
      inflightMax: o.forwardsInflightMax ?? forwardsInflightMaxDefault,
    });
  }

  start(): void {
    this.unsubscribe = [
      this.o.store.subscribe((ev) => {
        if (!viewCollections.has(ev.collection)) return;
        this.cached = null;
        if (ev.collection === networksCollection) this.schedule(coalesceMs);
      }),
      this.o.store.subscribeRestore(() => {
        this.cached = null;
        this.schedule(coalesceMs);
      }),
    ];
    this.interval = setInterval(() => this.schedule(0), this.o.passIntervalMs ?? passIntervalMsDefault);
    this.interval.unref();
    this.schedule(0);
  }

  /** Stops the loop and closes every socket. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    for (const u of this.unsubscribe) u();
    this.unsubscribe = [];
    if (this.interval !== null) clearInterval(this.interval);
    if (this.timer !== null) clearTimeout(this.timer);
    await this.running;
    await Promise.all([...this.listeners.values()].map((l) => l.close()));
    this.listeners.clear();
  }

  /** Network name to the address:port answering for it. */
  listening(): Map<string, string> {
    return new Map([...this.listeners].map(([n, l]) => [n, `${l.address}:${l.port}`]));
  }

  /** The names as of the node's applied store now (read again after any change of what they come from). */
  view(): DnsView {
    this.cached ??= dnsView(this.reader.read(), readNetworkState(this.o.store), this.o.nodeId);
    return this.cached;
  }

  /** One pass, after any pass under way: sockets opened for the networks with a gateway here, closed for the rest. */
  converge(): Promise<void> {
    this.running = this.running.then(() => this.pass()).catch((err: unknown) => {
      this.o.log.warn(`dns: ${(err as Error).message}; trying again at the next pass`);
    });
    return this.running;
  }

  private schedule(ms: number): void {
    if (this.closed || this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.converge();
    }, ms);
  }

  private async pass(): Promise<void> {
    if (this.closed) return;
    const wanted = new Map<string, string>();
    for (const n of this.view().networks.values()) {
      if (n.gateway !== null) wanted.set(n.name, this.o.bindAddress?.(n.name, n.gateway) ?? n.gateway);
    }
    for (const [name, l] of this.listeners) {
      if (wanted.get(name) === l.address) continue;
      await l.close();
      this.listeners.delete(name);
      this.note(name, `dns: stopped answering for network ${name} on ${l.address} (${wanted.has(name) ? 'its gateway changed' : 'no slice of it here any more'})`, 'info');
    }
    for (const [name, address] of wanted) {
      if (this.listeners.has(name) || this.closed) continue;
      try {
        const l = await openListener(name, address, this.o.port ?? dnsPort, (msg, t, from) => this.answer(name, msg, t, from), (err) => this.o.log.warn(`dns: network ${name}: ${err.message}`));
        this.listeners.set(name, l);
        this.note(name, `dns: answering for network ${name} on ${address}:${l.port} (udp, tcp)`, 'info');
      } catch (err) {
        this.note(name, `dns: cannot listen on ${address}:${this.o.port ?? dnsPort} for network ${name} yet: ${bindProblem(err)}; trying again every ${(this.o.passIntervalMs ?? passIntervalMsDefault) / 1000} s`, 'warn');
      }
    }
    for (const name of this.logged.keys()) if (!wanted.has(name) && !this.listeners.has(name)) this.logged.delete(name);
  }

  private note(network: string, line: string, level: 'info' | 'warn'): void {
    if (this.logged.get(network) === line) return;
    this.logged.set(network, line);
    this.o.log[level](line);
  }

  /** The answer to one query asked on `network`; null to stay silent. Never throws: a query it cannot answer gets FORMERR. */
  private async answer(network: string, msg: Buffer, transport: Transport, from: string): Promise<Buffer | null> {
    // Silence, not REFUSED: an answer to a forged source would still be sent somewhere.
    if (!(this.o.acceptFrom ?? this.inSubnet)(network, from)) return this.count('foreign', null);
    try {
      return await this.answerQuery(network, msg, transport, from);
    } catch {
      return this.count('malformed', msg.length >= 12 ? headerOnly(msg.readUInt16BE(0), msg.readUInt16BE(2), 'FORMERR') : null);
    }
  }

  private async answerQuery(network: string, msg: Buffer, transport: Transport, from: string): Promise<Buffer | null> {
    const q = readQuery(msg);
    if (q.kind === 'reject') return this.count('malformed', q.reply);
    const view = this.view();
    const recursion = view.networks.get(network)?.internal === false;
    const bytesMax = transport === 'udp' ? udpBytesFor(q.packet) : tcpBytesMax;
    const d = decide(view, network, q.question, from);
    switch (d.kind) {
      case 'records':
        return this.count(d.addresses.length > 0 ? 'answered' : 'nodata', reply(q.packet, { rcode: 'NOERROR', addresses: d.addresses, recursion, bytesMax }));
      case 'nxdomain':
        return this.count('nxdomain', reply(q.packet, { rcode: 'NXDOMAIN', recursion, bytesMax }));
      case 'refused':
        return this.count('refused', reply(q.packet, { rcode: 'REFUSED', recursion, bytesMax }));
      case 'forward': {
        const r = await this.forwarder.forward(msg, transport);
        return r.kind === 'answer' ? this.count('forwarded', r.reply) : this.count('forward_failed', servfail(q.packet, recursion));
      }
    }
  }

  private readonly inSubnet = (network: string, address: string): boolean => {
    const subnet = this.view().networks.get(network)?.subnet;
    const a = parseAddress(address);
    return subnet !== undefined && a !== null && cidrContains(cidrOf(subnet), a);
  };

  private count<T>(result: DnsResult, out: T): T {
    this.counts[result]++;
    return out;
  }
}

function bindProblem(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  switch (e.code) {
    case 'EADDRNOTAVAIL': return 'the address is not on this host (EADDRNOTAVAIL: the network\'s bridge is not up yet)';
    case 'EACCES': return 'permission denied (EACCES: port 53 needs root or CAP_NET_BIND_SERVICE)';
    case 'EADDRINUSE': return 'something else listens there (EADDRINUSE)';
    default: return e.message;
  }
}
