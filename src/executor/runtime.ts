// The runtime port: what a node's agent needs from a container runtime. Two implementations:
// the in-memory one with fault injection (memory-runtime.ts, for tests, the control-plane
// simulator and `shoal dev --runtime memory`) and Docker through dockerode (docker-runtime.ts).
//
// The port is narrow on purpose (SwarmKit's executor is the model): the agent lists the
// containers it owns by label, creates, starts, stops and removes them, inspects one, and
// follows events; reads a container's log; lists and removes images (the image cleaner).
// Everything else (what should run, where) comes from the store.

import { containerSettingsNone, type ContainerSettings, type DeviceSpec, type HealthCheckSpec, type LogSpec, type MountSpec, type PortSpec, type ResourceLimits } from '../resources/spec/service-spec.ts';

/** Labels every container shoal creates carries (src/executor/labels.ts builds and reads them). */
export type Labels = Record<string, string>;

/** What to create: a service's spec resolved for one task on this node. */
export interface ContainerSpec {
  /** A name unique on the runtime (`shoal-<service>.<slot>.<taskId>`). */
  name: string;
  image: string;
  /** Replaces the image's entrypoint; null = the image's. */
  command: string[] | null;
  /** Replaces the image's command; null = the image's. */
  args: string[] | null;
  env: Record<string, string>;
  user: string | null;
  labels: Labels;
  limits: ResourceLimits;
  ports: PortSpec[];
  mounts: MountSpec[];
  devices: DeviceSpec[];
  capAdd: string[];
  capDrop: string[];
  privileged: boolean;
  hostNetwork: boolean;
  /**
   * The overlay networks it joins, in the service's order (the first is the one it is created
   * on; the runtime connects the rest before it starts). Empty: the runtime's default network.
   */
  networks: ContainerNetwork[];
  /** Name servers for its resolv.conf (the gateway of its first network, then the service's `dns`); empty: the runtime's default. */
  dns: string[];
  healthCheck: HealthCheckSpec | null;
  stopSignal: string;
  stopGracePeriodMs: number;
  logs: LogSpec;
  /** The service's container settings; its labels are in `labels` and its name servers in `dns`. */
  settings: RuntimeSettings;
}

/** The container settings a runtime applies itself (ContainerSettings but the labels and name servers, which ContainerSpec carries merged). */
export type RuntimeSettings = Omit<ContainerSettings, 'labels' | 'dns'>;

/** Settings that ask for nothing (a fresh copy). */
export function runtimeSettingsNone(): RuntimeSettings {
  const { labels: _labels, dns: _dns, ...rest } = containerSettingsNone();
  return rest;
}

/** One overlay network a container joins. */
export interface ContainerNetwork {
  /** The shoal Network's name (the runtime maps it to its own network: Docker's `shoal-<name>`). */
  name: string;
  /**
   * Its address there, from the network record (address-allocator.ts); null leaves the choice to
   * the runtime (the agent never creates a task's container before its addresses are allocated).
   */
  address: string | null;
}

export type ContainerState = 'created' | 'running' | 'paused' | 'restarting' | 'exited' | 'dead';
export type HealthState = 'starting' | 'healthy' | 'unhealthy';

export interface ContainerInfo {
  id: string;
  name: string;
  image: string;
  labels: Labels;
  state: ContainerState;
  /** The exit code once it exited; null otherwise. */
  exitCode: number | null;
  /** Wall-clock ms of the last start and of the last exit (as the runtime reports them); null if never. */
  startedAt: number | null;
  finishedAt: number | null;
  /** The health check's verdict; null when the container has none. */
  health: HealthState | null;
  /** A runtime's own words on a failure (OOM-killed, a start error); null if none. */
  error: string | null;
  /** The host pid of its first process while it runs, when the runtime says (Docker does). */
  pid?: number;
}

export type RuntimeEventType = 'create' | 'start' | 'die' | 'health' | 'destroy' | 'oom';

export interface RuntimeEvent {
  type: RuntimeEventType;
  containerId: string;
  labels: Labels;
  /** Wall-clock ms as the runtime stamped it. */
  at: number;
  /** For 'die': the exit code. For 'health': the new state. */
  exitCode?: number;
  health?: HealthState;
}

/** Which of a container's output streams a log line came from. */
export type LogStream = 'stdout' | 'stderr';

/** One line of a container's log, without its newline. */
export interface LogLine {
  stream: LogStream;
  /** Wall-clock ms the runtime stamped on the line. */
  at: number;
  text: string;
}

export interface LogOptions {
  /** Keep reading as the container writes, until it stops or is removed, or the reader closes. */
  follow: boolean;
  /** Only the last this many lines already written (then, with follow, what comes next); null = all. */
  tailLines: number | null;
  /** Only lines stamped at or after this wall-clock ms; null = from the start. */
  sinceMs: number | null;
}

/**
 * A container's log lines, read in order. Iterating pulls lines as the reader is ready for them
 * (a slow reader slows the runtime's stream down; nothing piles up). A stream that breaks ends
 * the iteration with a RuntimeError. close() stops reading, a follow included; idempotent.
 */
export interface LogReader extends AsyncIterable<LogLine> {
  close(): void;
}

import type { PullProgress } from './pull-progress.ts';

/** The credentials a pull sends to a private registry (a registry login, src/resources/registry-logins.ts). Never logged. */
export interface RegistryAuth {
  /** The registry's host, as the login names it. */
  serveraddress: string;
  username: string;
  password: string;
}

/** A platform an image offers, as a registry's image index names it. */
export interface ImagePlatform {
  os: string;
  architecture: string;
  /** `v7`, `v8`; absent when the index names none. */
  variant?: string;
}

/** What a tag names in its registry now: the manifest (or image index) digest and the platforms it offers. */
export interface ResolvedImage {
  digest: string;
  platforms: ImagePlatform[];
}

/** What ensureImage did: the image was there, or it had to be pulled (the image cleaner tracks those). */
export type ImageEnsured = 'present' | 'pulled';

/** An image on the runtime. */
export interface ImageInfo {
  /** The runtime's image id (`sha256:...`). */
  id: string;
  /** Every reference that names it: `repo:tag` and `repo@sha256:...`, as the runtime lists them. */
  refs: string[];
}

/** Why a runtime call failed, in categories the agent acts on differently. */
export type RuntimeErrorKind =
  /** The runtime cannot be reached (Docker down, socket missing): the node reports `runtime: unavailable`. */
  | 'unavailable'
  /** The image is absent and could not be pulled in time: the task fails with image_pull_failed. */
  | 'image_pull_failed'
  /** No such container (removed behind the agent's back): the agent re-reads and converges. */
  | 'not_found'
  /** The call did not answer within its timeout: a hung runtime. */
  | 'timeout'
  /**
   * A named volume the task's spec gives options exists on the node with another driver or other
   * options (volume-options.ts): the task fails with the message, which starts with the code.
   */
  | 'volume_options_differ'
  /** Anything else the runtime refused (a bad mount, a device that does not exist, ...): the task fails with the message. */
  | 'failed';

export class RuntimeError extends Error {
  constructor(readonly kind: RuntimeErrorKind, message: string) {
    super(message);
    this.name = 'RuntimeError';
  }
}

/** What a command run in a container (`exec`) ended with. */
export interface ExecResult {
  exitCode: number;
  /** Its output, each cut to the last `execOutputBytesMax` bytes. */
  stdout: string;
  stderr: string;
}

/** The output of an exec kept, per stream: the tail (an error's last lines are what says why). */
export const execOutputBytesMax = 4096;

export interface Runtime {
  /** 'memory' or 'docker': shown in `shoal node ls`. */
  readonly kind: string;
  /** Resolves when the runtime answers; rejects with RuntimeError('unavailable') when it does not. */
  ping(): Promise<void>;
  /** Containers carrying every label of `labels` (running or not). */
  list(labels: Labels): Promise<ContainerInfo[]>;
  /**
   * Runs argv in the running container `id` (no shell) and waits for it, at most `timeoutMs`
   * (RuntimeError 'timeout' then; Docker cannot kill an exec, so the process is left to end).
   * Optional: a runtime without it runs no replicated volumes' hooks.
   */
  exec?(id: string, argv: readonly string[], timeoutMs: number): Promise<ExecResult>;
  /**
   * Makes sure the image is present, pulling it when absent, within `timeoutMs` (with `auth`, the
   * registry login's credentials); says which. A failed pull rejects with
   * RuntimeError('image_pull_failed') whose message starts with its kind (pull-errors.ts).
   * `onProgress` hears of the pull's progress as it goes (pull-progress.ts).
   */
  ensureImage(image: string, timeoutMs: number, auth?: RegistryAuth, onProgress?: (p: PullProgress) => void): Promise<ImageEnsured>;
  /** Whether the image is on the runtime already (no pull): the agent reads a registry password only when it is not. */
  imagePresent(image: string): Promise<boolean>;
  /** Every image on the runtime (shoal's and anyone else's). */
  listImages(): Promise<ImageInfo[]>;
  /**
   * Asks the image's registry what the reference names now (Docker's GET /distribution/{name}/json),
   * within `timeoutMs`, with `auth` when given. 'local' for an image that is on this runtime
   * without having come from a registry (imported or built: no registry knows it). Rejects with
   * RuntimeError('image_pull_failed') whose message starts with the failure's kind (pull-errors.ts).
   */
  resolveImage?(image: string, timeoutMs: number, auth?: RegistryAuth): Promise<ResolvedImage | 'local'>;
  /**
   * Removes one image reference (a tag or a digest reference); the image goes with its last one.
   * Never forced: an image a container uses (any container, running or not) is refused with
   * RuntimeError('failed'). An absent reference resolves.
   */
  removeImage(ref: string): Promise<void>;
  /** Creates a container (not started); returns its id. */
  create(spec: ContainerSpec): Promise<string>;
  start(id: string): Promise<void>;
  /** Sends `signal`, then SIGKILL after `graceMs`; resolves once it has exited. Already stopped: resolves. */
  stop(id: string, opts: { signal: string; graceMs: number }): Promise<void>;
  /** Sends `signal` at once (SIGKILL for exclusive tasks whose lease expired). */
  kill(id: string, signal: string): Promise<void>;
  /** Removes a stopped container (and forces a running one). Absent: resolves. */
  remove(id: string): Promise<void>;
  /** One container, or undefined when it does not exist. */
  inspect(id: string): Promise<ContainerInfo | undefined>;
  /**
   * A container's log, from its start or `sinceMs`, the last `tailLines`, then what comes next
   * when following. Rejects with RuntimeError('not_found') for a container that does not exist,
   * 'unavailable' when the runtime does not answer; resolves once the runtime has accepted.
   */
  logs(id: string, opts: LogOptions): Promise<LogReader>;
  /**
   * Follows the runtime's events for containers carrying `labels`; returns the unsubscribe.
   * `onError` hears of a broken stream (the runtime went away); the agent re-lists and
   * subscribes again when it comes back.
   */
  events(labels: Labels, onEvent: (e: RuntimeEvent) => void, onError: (err: RuntimeError) => void): () => void;
  /** Releases connections; idempotent. Containers keep running. */
  close(): Promise<void>;
}
