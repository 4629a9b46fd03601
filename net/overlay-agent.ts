// The node's overlay agent: converges, for every network this node hosts, the Docker network
// shoal made for it (overlay-docker.ts) and, with a mesh, the VXLAN device on its bridge with one
// flooding entry per peer (overlay-links.ts), toward the node's applied store (overlay-plan.ts).
//
// Level-triggered like the mesh agent (mesh-agent.ts): a store change, the resync timer or the
// end of a failed pass only marks it dirty; a pass re-reads everything and converges. Adding is
// always safe; anything that takes away (a flooding entry, a device, a Docker network, a device
// remade with another VNI or source) first takes a read barrier, and without one the pass only
// adds: after a restart, or cut off from the leader, the applied store may be older than what
// the node already has. A Docker network is removed only once no container is attached to it.
//
// A restart adopts what exists: the names are derived from the store alone, so the next run
// finds the same network, bridge and device and changes nothing that is right. Stopping the
// agent leaves everything in place (running containers keep their network).
//
// The agent tells the container agent which networks are in place here (OverlayReadiness): a
// task's container is created only on a network that is.

import type { NetworkRecord } from '../src/resources/network-resources.ts';
import type { NodeRecord } from '../src/resources/records.ts';
import type { OverlayReadiness } from '../src/executor/task-networks.ts';
import type { DockerNetworkInfo, DockerNetworks } from './overlay-docker.ts';
import type { VxlanLink, VxlanLinks } from './overlay-links.ts';
import { vxlanName } from '../src/resources/overlay-names.ts';
import { PassLoop, readBarrierWithin } from './pass-loop.ts';
import { planOverlay, type OverlayNetworkPlan, type OverlayVxlanPlan } from './overlay-plan.ts';

export interface OverlayView {
  /** The network records of the applied store (valid ones). */
  networks(): Iterable<NetworkRecord>;
  /** The node records of the applied store (valid ones). */
  nodes(): Iterable<NodeRecord>;
  /** Calls back on every store change that may concern the overlay; returns the unsubscribe. */
  subscribe(onChange: () => void): () => void;
}

export interface OverlayAgentOptions {
  self: string;
  clusterId: string;
  /** The mesh's MTU on this node; null without a mesh (then no VXLAN: the networks stay on this node). */
  meshMtu: number | null;
  view: OverlayView;
  docker: DockerNetworks;
  /** The VXLAN devices; null without a mesh. */
  links: VxlanLinks | null;
  /** Resolves once this node has applied everything the leader had committed; rejects without quorum. */
  caughtUp: () => Promise<void>;
  log: { info(msg: string): void; warn(msg: string): void; debug(msg: string): void };
  /** How often it checks even when nothing changed (a Docker restart remakes bridges). */
  resyncIntervalMs?: number;
}

export const overlayResyncIntervalMsDefault = 5_000;
/** After a failed pass, the next one waits this long. */
export const overlayRetryMs = 2_000;
/** A read barrier that takes longer counts as no quorum for the pass. */
export const overlayBarrierTimeoutMs = 5_000;
/** A VXLAN device shoal made: `vx-` and eight hex digits (overlay-names.ts). */
const ownVxlanPattern = /^vx-[0-9a-f]{8}$/;

export class OverlayAgent implements OverlayReadiness {
  private readonly loop: PassLoop;
  private unsubscribe: (() => void) | null = null;
  private timer: NodeJS.Timeout | undefined;
  /** The networks in place here, each with the gateway address its Docker network has on this host. */
  private ready = new Map<string, string>();
  private readonly listeners = new Set<() => void>();
  /** The pass's read barrier, taken at most once per pass. */
  private passBarrier: Promise<boolean> | null = null;
  /** Passes done (for tests). */
  passes = 0;

  constructor(private readonly opts: OverlayAgentOptions) {
    this.loop = new PassLoop({ name: 'overlay', pass: () => this.pass(), retryMs: overlayRetryMs, log: opts.log });
  }

  start(): void {
    this.unsubscribe = this.opts.view.subscribe(() => this.mark());
    this.timer = setInterval(() => this.mark(), this.opts.resyncIntervalMs ?? overlayResyncIntervalMsDefault);
    this.timer.unref();
    this.mark();
  }

  /** Stops converging; everything made stays as it is. Idempotent. */
  async close(): Promise<void> {
    this.unsubscribe?.();
    clearInterval(this.timer);
    this.listeners.clear();
    await this.loop.close();
  }

  /** Waits until no pass runs (tests). */
  idle(): Promise<void> {
    return this.loop.idle();
  }

  isReady(network: string): boolean {
    return this.ready.has(network);
  }

  gatewayOn(network: string): string | null {
    return this.ready.get(network) ?? null;
  }

  subscribe(onChange: () => void): () => void {
    this.listeners.add(onChange);
    return () => this.listeners.delete(onChange);
  }

  private mark(): void {
    this.loop.mark();
  }

  private again(): void {
    this.loop.retryLater();
  }

  private async pass(): Promise<void> {
    this.passes++;
    this.passBarrier = null;
    const { view, docker, links, clusterId } = this.opts;
    const plan = planOverlay({ self: this.opts.self, networks: view.networks(), nodes: view.nodes(), meshMtu: this.opts.meshMtu });
    const existing = await docker.list(clusterId);
    const devices = links === null ? [] : await links.list();
    const ready = new Map<string, string>();
    const problems: string[] = [];
    for (const p of plan) {
      try {
        const gateway = await this.convergeNetwork(p, existing, devices);
        if (gateway !== null) ready.set(p.network, gateway);
      } catch (err) {
        problems.push(`network ${p.network}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    this.setReady(ready);
    await this.removeStale(plan, existing, devices);
    if (problems.length > 0) throw new Error(problems.join('; '));
  }

  private setReady(ready: Map<string, string>): void {
    const same = ready.size === this.ready.size && [...ready].every(([n, g]) => this.ready.get(n) === g);
    this.ready = ready;
    if (!same) for (const l of [...this.listeners]) l();
  }

  /**
   * One hosted network: its Docker network, then its VXLAN device. Once both are in place, the
   * gateway address the Docker network has on this host (the containers' DNS server); else null.
   */
  private async convergeNetwork(p: OverlayNetworkPlan, existing: readonly DockerNetworkInfo[], devices: readonly VxlanLink[]): Promise<string | null> {
    const made = existing.find((n) => n.name === p.dockerNetwork);
    // The gateway is not compared: nodes sharing one Docker daemon (`shoal dev`) share its network,
    // whose gateway is the first node's (and so is their containers' DNS server). Another subnet
    // means it was made for an earlier network of this name (removed and applied again).
    let gateway = made?.gateway ?? p.gateway;
    if (made !== undefined && (made.subnet !== p.subnet || made.bridge !== p.bridge)) {
      if (!(await this.barrier()) || !(await this.removeDockerNetwork(made))) return null;
      await this.createDockerNetwork(p);
      gateway = p.gateway;
    } else if (made === undefined) {
      await this.createDockerNetwork(p);
    }
    if (p.vxlan === null) return p.waitingForMesh ? null : gateway;
    await this.convergeVxlan(p, p.vxlan, devices.find((d) => d.name === p.vxlan?.name));
    return gateway;
  }


  private async createDockerNetwork(p: OverlayNetworkPlan): Promise<void> {
    await this.opts.docker.create({
      name: p.dockerNetwork, network: p.network, clusterId: this.opts.clusterId, bridge: p.bridge, subnet: p.subnet, gateway: p.gateway, internal: p.internal, mtu: p.mtu,
    });
    this.opts.log.info(`overlay: created Docker network ${p.dockerNetwork} (bridge ${p.bridge}, ${p.subnet}, gateway ${p.gateway}${p.internal ? ', internal' : ''}, MTU ${p.mtu})`);
  }

  private async convergeVxlan(p: OverlayNetworkPlan, v: OverlayVxlanPlan, device: VxlanLink | undefined): Promise<void> {
    const links = this.opts.links;
    if (links === null) throw new Error('assertion: a VXLAN plan without the links port');
    let current = device;
    if (current !== undefined && (current.vni !== v.vni || current.local !== v.local)) {
      if (!(await this.barrier())) return;
      await links.remove(current.name);
      this.opts.log.info(`overlay: removed ${current.name} (VNI ${current.vni}, local ${String(current.local)}) to make it again`);
      current = undefined;
    }
    if (current === undefined) {
      await links.add(v.name, v.vni, v.local);
      this.opts.log.info(`overlay: created ${v.name} (VNI ${v.vni}, local ${v.local}) on ${p.bridge}`);
    }
    if (current === undefined || current.master !== p.bridge || current.mtu !== p.mtu || !current.up) await links.attach(v.name, p.bridge, p.mtu);
    const floods = current === undefined ? [] : await links.floodDestinations(v.name);
    for (const dst of v.peers) if (!floods.includes(dst)) await links.addFlood(v.name, dst);
    const extra = floods.filter((d) => !v.peers.includes(d));
    if (extra.length > 0 && (await this.barrier())) for (const dst of extra) await links.removeFlood(v.name, dst);
    if (v.peers.length !== floods.length || extra.length > 0) this.opts.log.info(`overlay: ${v.name} floods to ${v.peers.length === 0 ? 'no peer' : v.peers.join(', ')}`);
  }

  /** Docker networks and VXLAN devices of networks this node no longer hosts: removed after a read barrier, networks only once nothing is attached. */
  private async removeStale(plan: readonly OverlayNetworkPlan[], existing: readonly DockerNetworkInfo[], devices: readonly VxlanLink[]): Promise<void> {
    const wanted = new Set(plan.map((p) => p.dockerNetwork));
    const wantedDevices = new Set(plan.flatMap((p) => (p.vxlan === null ? [] : [p.vxlan.name])));
    const local = plan.find((p) => p.vxlan !== null)?.vxlan?.local ?? null;
    const staleNetworks = existing.filter((n) => !wanted.has(n.name));
    // Only devices this node made: shoal's name pattern, and this node's mesh address as source.
    const staleDevices = devices.filter((d) => ownVxlanPattern.test(d.name) && !wantedDevices.has(d.name) && (local === null || d.local === local));
    if (staleNetworks.length + staleDevices.length === 0 || !(await this.barrier())) return;
    // A network whose containers are still attached keeps its device too: they still talk across nodes.
    const kept = new Set<string>();
    for (const n of staleNetworks) if (!(await this.removeDockerNetwork(n))) kept.add(vxlanName(n.network));
    const links = this.opts.links;
    if (links === null) return;
    for (const d of staleDevices.filter((x) => !kept.has(x.name))) {
      await links.remove(d.name);
      this.opts.log.info(`overlay: removed ${d.name}: no network of this node uses it any more`);
    }
  }

  /** Removes a Docker network unless a container is still attached (then later: the task's container goes first). */
  private async removeDockerNetwork(n: DockerNetworkInfo): Promise<boolean> {
    const attached = await this.opts.docker.attachedCount(n.id);
    if (attached > 0) {
      this.opts.log.debug(`overlay: Docker network ${n.name} still has ${attached} container(s) attached; removing it once they are gone`);
      this.again();
      return false;
    }
    await this.opts.docker.remove(n.id);
    this.opts.log.info(`overlay: removed Docker network ${n.name}: this node no longer hosts network ${n.network}`);
    return true;
  }

  private barrier(): Promise<boolean> {
    this.passBarrier ??= this.takeBarrier();
    return this.passBarrier;
  }

  private async takeBarrier(): Promise<boolean> {
    if (await readBarrierWithin(this.opts.caughtUp, overlayBarrierTimeoutMs)) return true;
    this.opts.log.debug('overlay: no read barrier (no quorum?): only adding this pass');
    this.again();
    return false;
  }
}
