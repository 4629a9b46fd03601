// The normalized Service spec: what `parseSpecs` returns and what a ServiceRecord stores.
//
// Every field is present, with its default filled in, and "none" is `null` (the store holds
// JSON, where `undefined` does not exist), so later code never asks whether a field was
// written. Quantities are in base units with the unit in the name (`cpuMillis`, `memoryBytes`,
// `intervalMs`). The authoring form (what people write) is in service-reader.ts and
// docs/resources.md; the defaults are listed there.
//
// The zod schema below validates the stored form (the API and the store read it back with it);
// a compile-time check keeps it and the interfaces identical.

import { z } from 'zod';
import type { Constraint } from './constraint.ts';

export interface ResourceAmounts {
  /** CPU in millicores (1000 = one core). */
  cpuMillis: number;
  /** Memory in bytes. */
  memoryBytes: number;
}

export interface ResourceLimits {
  /** CPU the container may use, in millicores; null = no limit. */
  cpuMillis: number | null;
  /** Memory the container may use, in bytes; null = no limit. */
  memoryBytes: number | null;
}

export interface PortSpec {
  /** The port on the node: on every node in ingress mode (the routing mesh), on the task's node in host mode. */
  published: number;
  /** The port inside the container. */
  target: number;
  protocol: 'tcp' | 'udp';
  /**
   * The node's address the port is published on (Docker's HostIp), an IPv4 or IPv6 address;
   * absent: every address. Feature level 6 (src/resources/record-compat.ts).
   */
  hostIp?: string;
  /**
   * `ingress`: open on every node, which forwards to a running, healthy task of the service
   * (the routing mesh, net/ingress-render.ts); written only then. Absent: `host`, the port is
   * open only on the node that runs the task (every record written before the mesh). Feature
   * level 6 (src/resources/record-compat.ts).
   */
  mode?: 'ingress';
}

/** Whether the port is published through the routing mesh (docs/network.md, "Ingress"). */
export function isIngressPort(p: PortSpec): boolean {
  return p.mode === 'ingress';
}

export interface MountSpec {
  /** `bind`: a path of the node; `volume`: a named volume of the node's runtime. */
  type: 'bind' | 'volume';
  /** An absolute host path (bind) or a volume name (volume). */
  source: string;
  /** An absolute path in the container. */
  target: string;
  readOnly: boolean;
  /**
   * A named volume's options for Docker's `local` driver (its DriverOpts: `type`, `device`, `o`,
   * `size`): the node creates the volume with them before the container (an NFS or CIFS share, a
   * tmpfs, a bind), and refuses one of that name that exists with other options (Docker would
   * keep its first ones silently). Absent: none, the volume Docker creates on first use. Only
   * with `type: volume`. Feature level 6 (src/resources/record-compat.ts).
   */
  volumeOptions?: Record<string, string>;
  /**
   * A replicated volume (issue 41, docs/volumes.md): only on a `volume` mount of an exclusive
   * service. Absent on every other mount (and on records written before it).
   */
  replicate?: ReplicateSpec;
}

/** How a replicated volume is copied to other nodes (docs/volumes.md). */
export interface ReplicateSpec {
  /** Complete copies kept on other nodes besides the live one (default 2). */
  copies: number;
  /** The interval between snapshots sent to the holders (default 30 s). */
  everyMs: number;
  /** The size of the volume's filesystem (default 1 GiB). */
  sizeBytes: number;
  /** The most bytes per second the writer sends to each holder; absent: unbounded. */
  maxBandwidthBytes?: number;
  /** Commands run in the task's container around each snapshot (application-consistent copies); absent: none. */
  hooks?: ReplicateHooks;
}

/** A replicated volume's hooks (docs/volumes.md, "Hooks"): each an argv run with Docker exec, no shell. */
export interface ReplicateHooks {
  /** Run before the snapshot (flush, `sqlite3 DB '.backup FILE'`); failing or timing out, the pass takes no version. */
  before?: string[];
  /** Run after the snapshot (resume writes); failing, the pass's version is still sent, and the failure recorded. */
  after?: string[];
  /** Each hook's bound (default 30 s). */
  timeoutMs: number;
}

export interface DeviceSpec {
  /** A device of the node, under /dev (a USB radio: /dev/ttyUSB0, /dev/serial/by-id/...). */
  hostPath: string;
  /** Where it appears in the container (default: the same path). */
  containerPath: string;
  /** cgroup permissions, some of r (read), w (write), m (mknod), in that order. */
  permissions: string;
}

export interface SecretRefSpec {
  /** The secret's name (`shoal secret create NAME`). */
  name: string;
  /**
   * The file's name under /run/secrets/ in the container (default: the secret's name), or an
   * absolute container path where it is mounted (feature level 6).
   */
  target: string;
  /** The file's permission bits (default 0o400), as a number. */
  mode: number;
  /**
   * The file's owner in the container's user namespace (feature level 6, issue 39's compose
   * `uid`/`gid`): absent means 0 (root), and a record at the default leaves it out.
   */
  uid?: number;
  /** The file's group (absent: 0). */
  gid?: number;
}

export interface HealthCheckSpec {
  /** Run in the container, exec form; exit 0 is healthy. */
  command: string[];
  intervalMs: number;
  timeoutMs: number;
  /** Consecutive failures before the task is unhealthy. */
  retries: number;
  /** Failures in this time after start do not count. */
  startPeriodMs: number;
}

export interface PlacementSpec {
  /** spread: fewest tasks of the service first; binpack: fullest node first. */
  strategy: 'spread' | 'binpack';
  /** A node label key to spread over first (a rack, a room); null = spread over nodes. */
  spreadOver: string | null;
}

export interface LogSpec {
  /** Size of one log file before it is rotated. */
  maxSizeBytes: number;
  /** Rotated files kept. */
  maxFiles: number;
}

export interface RestartPolicy {
  /** always: restart on any exit; on-failure: on a non-zero exit; never. */
  condition: 'always' | 'on-failure' | 'never';
  /** Wait before the first restart; doubled after each consecutive failure. */
  delayMs: number;
  /** The doubling stops here. */
  maxDelayMs: number;
  /** Consecutive failed attempts before the slot is left failed; null = no limit. */
  maxAttempts: number | null;
}

export interface UpdatePolicy {
  /** Tasks replaced at once. */
  parallelism: number;
  /** Wait between batches. */
  delayMs: number;
  /** How long a new task must stay running before its batch counts as good. */
  monitorMs: number;
  /** What a failed batch does: pause the update, or roll back to the previous spec. */
  failureAction: 'pause' | 'rollback';
  /** stop-first: stop the old task, then start the new; start-first: the reverse (a brief surge). */
  order: 'stop-first' | 'start-first';
}

/**
 * The service's disruption budget: how many of its slots may be unavailable at once before a
 * voluntary action (a rolling update or rollback, a drain's moves, a rebalance, a drill) waits
 * (src/control/disruption-budget.ts). Slots lost involuntarily (a node down) count against it.
 */
export interface DisruptionSpec {
  /** A number of slots, or a percentage of the service's slots (`unit`). 0: none. */
  maxUnavailable: number;
  /** slots: maxUnavailable slots; percent: maxUnavailable % of the slots, rounded down, at least 1 when above 0%. */
  unit: 'slots' | 'percent';
}

/** A tmpfs mounted in the container (Docker's HostConfig.Tmpfs). */
export interface TmpfsSpec {
  /** An absolute path in the container. */
  target: string;
  /** Its size in bytes; null = the kernel's default (half the node's memory). */
  sizeBytes: number | null;
  /** The permission bits of its root, as a number (0o1777); null = the runtime's default. */
  mode: number | null;
}

/** A line added to the container's /etc/hosts. */
export interface ExtraHostSpec {
  host: string;
  /** An IPv4 or IPv6 address. */
  address: string;
}

/** A resource limit (setrlimit(2)) of the container's processes. */
export interface UlimitSpec {
  /** The limit's name without RLIMIT_, lower case (nofile, nproc, memlock, ...). */
  name: string;
  soft: number;
  /** At least soft. */
  hard: number;
}

/**
 * The container settings added with issue 39's Compose fields (feature level 6,
 * featureLevelContainerSettings): each a plain Docker create option. At their defaults they ask
 * for nothing and are left out of the record (src/resources/record-compat.ts).
 */
export interface ContainerSettings {
  /** The process's working directory; null = the image's. */
  workingDir: string | null;
  /** The container's hostname; null = the runtime's (its id). */
  hostname: string | null;
  /** Run an init (Docker's tini) as PID 1 that reaps zombies and forwards signals. */
  init: boolean;
  /** Mount the container's root file system read-only. */
  readOnlyRootfs: boolean;
  /** The size of /dev/shm in bytes; null = the runtime's default (64 MiB for Docker). */
  shmSizeBytes: number | null;
  /** tmpfs mounts (targets unique, sorted by target). */
  tmpfs: TmpfsSpec[];
  /** Lines added to /etc/hosts, in the order written. */
  extraHosts: ExtraHostSpec[];
  /** Name servers, after the node's service resolver when the service is on a network. */
  dns: string[];
  /** DNS search domains. */
  dnsSearch: string[];
  /** resolv.conf options (ndots:2, ...). */
  dnsOptions: string[];
  /** Resource limits, sorted by name. */
  ulimits: UlimitSpec[];
  /** Namespaced kernel parameters (net.*, kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*), keys sorted. */
  sysctls: Record<string, string>;
  /** Labels on the task's containers (keys sorted; never under io.shoal., which are shoal's own). */
  labels: Record<string, string>;
}

/** The settings that ask for nothing (a fresh copy): what a record without them reads as. */
export function containerSettingsNone(): ContainerSettings {
  return {
    workingDir: null, hostname: null, init: false, readOnlyRootfs: false, shmSizeBytes: null, tmpfs: [], extraHosts: [], dns: [],
    dnsSearch: [], dnsOptions: [], ulimits: [], sysctls: {}, labels: {},
  };
}

export interface ServiceSpec extends ContainerSettings {
  /** A DNS label (lower-case letters, digits, `-`; starts with a letter; at most 63). */
  name: string;
  /** The image reference (`busybox:1.36`, `ghcr.io/o/app@sha256:...`). */
  image: string;
  /**
   * The registry login (`shoal registry login HOST`) its image is pulled with, by host; null =
   * the login of the image's own registry, if any (docs/docker.md, "Private registries").
   */
  registryLogin: string | null;
  /** Replaces the image's entrypoint; null = the image's. */
  command: string[] | null;
  /** Replaces the image's command (its CMD); null = the image's. */
  args: string[] | null;
  /** Environment variables (keys sorted). */
  env: Record<string, string>;
  /** `user`, `uid` or `uid:gid`; null = the image's. */
  user: string | null;
  /** replicated: `replicas` tasks; global: one task on each eligible node. */
  mode: 'replicated' | 'global';
  /** The number of tasks of a replicated service; null for a global one. */
  replicas: number | null;
  resources: {
    /** What the scheduler sets aside on the node for each task. */
    reservations: ResourceAmounts;
    /** What the container may use at most. */
    limits: ResourceLimits;
  };
  /** All must hold for a node to take a task. */
  constraints: Constraint[];
  placement: PlacementSpec;
  /** At most this many tasks of the service on one node; null = no limit. */
  maxPerNode: number | null;
  ports: PortSpec[];
  mounts: MountSpec[];
  devices: DeviceSpec[];
  /** Linux capabilities added and dropped, upper case without CAP_, sorted. */
  capAdd: string[];
  capDrop: string[];
  privileged: boolean;
  /** The container shares the node's network stack; `ports` then names the ports it binds. */
  hostNetwork: boolean;
  healthCheck: HealthCheckSpec | null;
  /** Sent to stop the container (SIGTERM, ...); SIGKILL follows after the grace period. */
  stopSignal: string;
  stopGracePeriodMs: number;
  logs: LogSpec;
  restart: RestartPolicy;
  update: UpdatePolicy;
  /** The disruption budget; null: unwritten, the update's parallelism (slots). */
  disruption: DisruptionSpec | null;
  /** Must never run twice, even across a partition: runs under the node's lease (src/resources/lease.ts). */
  exclusive: boolean;
  /** Secrets delivered as read-only files under /run/secrets/ or at absolute paths (the files' paths unique). */
  secrets: SecretRefSpec[];
  /**
   * The overlay networks (Network resources, by name) its tasks attach to, sorted; each task
   * gets an address on each from its node's slice. Empty: none (the runtime's default network).
   */
  networks: string[];
  /**
   * More DNS names of the service on some of its networks (network name to names, sorted):
   * answered on that network as its own name is (net/dns-view.ts). Feature level 6.
   */
  networkAliases: Record<string, string[]>;
  /**
   * Fixed addresses (network name to an IPv4 address, keys sorted): the service's one task gets
   * exactly this address on that network, reserved in its allocation (address-allocator.ts).
   * Only with one replica, replaced stop-first. Feature level 6.
   */
  networkAddresses: Record<string, string>;
}

const nat = z.number().int().min(0);
const nonEmpty = z.string().min(1);

/** The largest uid or gid a secret's file may be given (Linux's, less the invalid (uid_t)-1). */
export const secretOwnerIdMax = 0xfffffffe;

export const constraintSchema = z.object({
  text: nonEmpty,
  attribute: z.enum(['label', 'name', 'id', 'os', 'arch', 'role']),
  label: nonEmpty.nullable(),
  operator: z.enum(['==', '!=', 'in']),
  values: z.array(z.string()).min(1),
}).strict();

/** The container settings' schema fields (a record without them reads them as none). */
export const containerSettingsShape = {
  workingDir: nonEmpty.nullable().default(null),
  hostname: nonEmpty.nullable().default(null),
  init: z.boolean().default(false),
  readOnlyRootfs: z.boolean().default(false),
  shmSizeBytes: z.number().int().min(1).nullable().default(null),
  tmpfs: z.array(z.object({ target: nonEmpty, sizeBytes: z.number().int().min(1).nullable(), mode: z.number().int().min(0).max(0o7777).nullable() }).strict()).default([]),
  extraHosts: z.array(z.object({ host: nonEmpty, address: nonEmpty }).strict()).default([]),
  dns: z.array(nonEmpty).default([]),
  dnsSearch: z.array(nonEmpty).default([]),
  dnsOptions: z.array(nonEmpty).default([]),
  ulimits: z.array(z.object({ name: nonEmpty, soft: z.number().int().min(-1), hard: z.number().int().min(-1) }).strict()).default([]),
  sysctls: z.record(z.string(), z.string()).default({}),
  labels: z.record(z.string(), z.string()).default({}),
};

/** The keys Docker's `local` volume driver takes (its validOpts): anything else it refuses. */
export const volumeOptionKeys = ['type', 'device', 'o', 'size'] as const;

/** A replicated volume's settings (stored form). */
export const replicateSchema = z.object({
  copies: z.number().int().min(1), everyMs: z.number().int().min(1), sizeBytes: z.number().int().min(1), maxBandwidthBytes: z.number().int().min(1).optional(),
  hooks: z.object({
    before: z.array(z.string()).min(1).optional(), after: z.array(z.string()).min(1).optional(), timeoutMs: z.number().int().min(1),
  }).strict().optional(),
}).strict();

/** A mount; `volumeOptions` and `replicate` (feature level 6) are present only when given. */
export const mountSchema = z.object({
  type: z.enum(['bind', 'volume']), source: nonEmpty, target: nonEmpty, readOnly: z.boolean(),
  volumeOptions: z.record(z.string(), z.string())
    .refine((o) => Object.keys(o).every((k) => (volumeOptionKeys as readonly string[]).includes(k)), { message: `the local volume driver takes ${volumeOptionKeys.join(', ')}` })
    .optional(),
  // Issue 41 (feature level 6): absent on a mount that is not replicated.
  replicate: replicateSchema.optional(),
}).strict();

/** A secret reference; `uid`/`gid` (feature level 6) are present only when not 0. */
export const secretRefSchema = z.object({
  name: nonEmpty, target: nonEmpty, mode: z.number().int().min(0).max(0o777),
  uid: z.number().int().min(0).max(secretOwnerIdMax).optional(), gid: z.number().int().min(0).max(secretOwnerIdMax).optional(),
}).strict();

export const serviceSpecSchema = z.object({
  name: z.string().regex(/^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/),
  image: nonEmpty,
  command: z.array(z.string()).min(1).nullable(),
  args: z.array(z.string()).nullable(),
  env: z.record(z.string(), z.string()),
  user: nonEmpty.nullable(),
  mode: z.enum(['replicated', 'global']),
  replicas: nat.nullable(),
  resources: z.object({
    reservations: z.object({ cpuMillis: nat, memoryBytes: nat }).strict(),
    limits: z.object({ cpuMillis: nat.nullable(), memoryBytes: nat.nullable() }).strict(),
  }).strict(),
  constraints: z.array(constraintSchema),
  placement: z.object({ strategy: z.enum(['spread', 'binpack']), spreadOver: nonEmpty.nullable() }).strict(),
  maxPerNode: z.number().int().min(1).nullable(),
  ports: z.array(z.object({
    published: z.number().int().min(1).max(65535), target: z.number().int().min(1).max(65535), protocol: z.enum(['tcp', 'udp']),
    // Feature level 6: absent on records written before (every address).
    hostIp: z.string().min(1).optional(),
    // Feature level 6: absent on records written before the routing mesh (host mode).
    mode: z.literal('ingress').optional(),
  }).strict()),
  mounts: z.array(mountSchema),
  devices: z.array(z.object({ hostPath: nonEmpty, containerPath: nonEmpty, permissions: z.string().regex(/^r?w?m?$/).min(1) }).strict()),
  capAdd: z.array(nonEmpty),
  capDrop: z.array(nonEmpty),
  privileged: z.boolean(),
  hostNetwork: z.boolean(),
  healthCheck: z.object({
    command: z.array(z.string()).min(1), intervalMs: nat, timeoutMs: nat, retries: z.number().int().min(1), startPeriodMs: nat,
  }).strict().nullable(),
  stopSignal: nonEmpty,
  stopGracePeriodMs: nat,
  logs: z.object({ maxSizeBytes: nat, maxFiles: z.number().int().min(1) }).strict(),
  restart: z.object({
    condition: z.enum(['always', 'on-failure', 'never']), delayMs: nat, maxDelayMs: nat, maxAttempts: z.number().int().min(1).nullable(),
  }).strict(),
  update: z.object({
    parallelism: z.number().int().min(1), delayMs: nat, monitorMs: nat,
    failureAction: z.enum(['pause', 'rollback']), order: z.enum(['stop-first', 'start-first']),
  }).strict(),
  // Records written before disruption budgets existed have none: the update's parallelism.
  disruption: z.object({ maxUnavailable: nat, unit: z.enum(['slots', 'percent']) }).strict()
    .refine((d) => d.unit === 'slots' || d.maxUnavailable <= 100, { message: 'a percentage is at most 100' }).nullable().default(null),
  exclusive: z.boolean(),
  // Records written before secrets existed have no such field: they read as none.
  secrets: z.array(secretRefSchema).default([]),
  // Records written before networks existed read as attached to none.
  networks: z.array(z.string().regex(/^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/)).default([]),
  // Records written before network aliases (feature level 6) have none.
  networkAliases: z.record(z.string().regex(/^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/), z.array(z.string().regex(/^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/))).default({}),
  // Records written before fixed addresses (feature level 6) have none.
  networkAddresses: z.record(z.string().regex(/^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/), z.string().min(1)).default({}),
  // Records written before the container settings (feature level 6) have none of them.
  ...containerSettingsShape,
  // Records written before logins could be named (feature level 6) pull with the image's registry's.
  registryLogin: nonEmpty.nullable().default(null),
}).strict();

/** True when A and B are the same type (each assignable to the other). */
export type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** A compile-time assertion: `const _: Assert<Same<X, Y>> = true`. */
export type Assert<T extends true> = T;

export type _ServiceSpecMatchesSchema = Assert<Same<z.infer<typeof serviceSpecSchema>, ServiceSpec>>;
export type _ConstraintMatchesSchema = Assert<Same<z.infer<typeof constraintSchema>, Constraint>>;
