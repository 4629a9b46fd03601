// The Docker networks of the overlay, through dockerode: one bridge network per shoal Network on
// each node that hosts it, named `shoal-<name>`, on the bridge `shl-<hash>` (overlay-names.ts),
// with the network's subnet, this node's gateway of its slice, `internal` as the spec says, the
// overlay's MTU, and labels saying whose it is. `docker network inspect shoal-<name>` shows it;
// `docker inspect` of a container shows its endpoint there.
//
// Every call has a timeout and fails with `net_tool_failed` naming what it did; answers are
// checked with zod (bytes from a socket).

import Docker from 'dockerode';
import { z } from 'zod';
import { ShoalError } from '../src/errors.ts';

/** The labels of a Docker network shoal made (the same `io.shoal.` prefix as its containers'). */
export const networkLabelKeys = {
  cluster: 'io.shoal.cluster',
  network: 'io.shoal.network',
} as const;

/** A call to Docker that takes longer fails. */
export const dockerNetworkCallTimeoutMs = 15_000;

/** What shoal asks Docker to create. */
export interface DockerNetworkSpec {
  /** `shoal-<name>`. */
  name: string;
  /** The shoal Network's name. */
  network: string;
  clusterId: string;
  bridge: string;
  subnet: string;
  gateway: string;
  internal: boolean;
  mtu: number;
}

/** One of shoal's Docker networks as Docker reports it. */
export interface DockerNetworkInfo {
  id: string;
  name: string;
  /** Its `io.shoal.network` label. */
  network: string;
  subnet: string | null;
  gateway: string | null;
  bridge: string | null;
}

export interface DockerNetworks {
  /** The networks labelled with this cluster's id. */
  list(clusterId: string): Promise<DockerNetworkInfo[]>;
  create(spec: DockerNetworkSpec): Promise<void>;
  /** How many containers have an endpoint on it. */
  attachedCount(id: string): Promise<number>;
  remove(id: string): Promise<void>;
}

/** The create body for `spec` (pure; tested without a daemon). */
export function networkCreateOptions(spec: DockerNetworkSpec): Docker.NetworkCreateOptions {
  return {
    Name: spec.name,
    Driver: 'bridge',
    CheckDuplicate: true,
    Internal: spec.internal,
    Attachable: true,
    IPAM: { Driver: 'default', Config: [{ Subnet: spec.subnet, Gateway: spec.gateway }] },
    Options: {
      'com.docker.network.bridge.name': spec.bridge,
      'com.docker.network.driver.mtu': String(spec.mtu),
    },
    Labels: { [networkLabelKeys.cluster]: spec.clusterId, [networkLabelKeys.network]: spec.network },
  };
}

const summarySchema = z.object({
  Id: z.string(),
  Name: z.string(),
  Labels: z.record(z.string(), z.string()).nullable().optional(),
  Options: z.record(z.string(), z.string()).nullable().optional(),
  IPAM: z.object({ Config: z.array(z.object({ Subnet: z.string().optional(), Gateway: z.string().optional() }).passthrough()).nullable().optional() }).passthrough().optional(),
}).passthrough();

const inspectSchema = z.object({ Containers: z.record(z.string(), z.unknown()).nullable().optional() }).passthrough();

/** Reads one network summary of `docker network ls` (the API's list) as shoal's, or null when it is not labelled as one. */
export function toDockerNetworkInfo(raw: unknown): DockerNetworkInfo | null {
  const r = summarySchema.safeParse(raw);
  if (!r.success) throw new ShoalError('net_tool_failed', `docker: a network in the list has an unexpected shape: ${r.error.issues[0]?.message ?? ''}`);
  const n = r.data;
  const network = n.Labels?.[networkLabelKeys.network];
  if (network === undefined) return null;
  const config = n.IPAM?.Config?.[0];
  return {
    id: n.Id, name: n.Name, network, subnet: config?.Subnet ?? null, gateway: config?.Gateway ?? null,
    bridge: n.Options?.['com.docker.network.bridge.name'] ?? null,
  };
}

export class DockerodeNetworks implements DockerNetworks {
  private readonly docker: Docker;

  constructor(socketPath?: string) {
    this.docker = new Docker(socketPath === undefined ? {} : { socketPath });
  }

  async list(clusterId: string): Promise<DockerNetworkInfo[]> {
    const raw = await this.call('listing networks', () => this.docker.listNetworks({ filters: { label: [`${networkLabelKeys.cluster}=${clusterId}`] } }));
    return (raw as unknown[]).map(toDockerNetworkInfo).filter((n): n is DockerNetworkInfo => n !== null);
  }

  async create(spec: DockerNetworkSpec): Promise<void> {
    await this.call(`creating network ${spec.name}`, () => this.docker.createNetwork(networkCreateOptions(spec)));
  }

  async attachedCount(id: string): Promise<number> {
    const raw = await this.call(`inspecting network ${id}`, () => this.docker.getNetwork(id).inspect() as Promise<unknown>);
    const r = inspectSchema.safeParse(raw);
    if (!r.success) throw new ShoalError('net_tool_failed', `docker: network ${id} inspects to an unexpected shape`);
    return Object.keys(r.data.Containers ?? {}).length;
  }

  async remove(id: string): Promise<void> {
    await this.call(`removing network ${id}`, () => this.docker.getNetwork(id).remove() as Promise<unknown>);
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ShoalError('net_tool_failed', `docker: ${what} did not answer within ${dockerNetworkCallTimeoutMs} ms`, { cmd: 'docker' })), dockerNetworkCallTimeoutMs);
    });
    try {
      return await Promise.race([fn(), deadline]);
    } catch (err) {
      if (err instanceof ShoalError) throw err;
      throw new ShoalError('net_tool_failed', `docker: ${what}: ${err instanceof Error ? err.message : String(err)}`, { cmd: 'docker' });
    } finally {
      clearTimeout(timer);
    }
  }
}
