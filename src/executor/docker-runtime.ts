// The runtime port on Docker, through dockerode over the local socket (or DOCKER_HOST).
//
// Every call has a timeout and fails with a RuntimeError whose kind the agent acts on:
// `unavailable` (no socket, refused, reset: the node reports `runtime: unavailable`),
// `not_found` (no such container), `image_pull_failed`, `timeout` (a hung daemon), or `failed`
// with Docker's own message. Nothing else escapes. What is created, and why (restart policy
// `no`, json-file rotation, ...), is in docker-container-config.ts and docs/docker.md.

import http from 'node:http';
import { inspect } from 'node:util';
import { Writable, type Readable } from 'node:stream';
import Docker from 'dockerode';
import { ShoalError } from '../errors.ts';
import {
  containerInspectSchema, containerSummarySchema, dockerEventSchema, imageSummarySchema, subscribedActions, toContainerInfo, toImageInfo, toRuntimeEvent,
} from './docker-answers.ts';
import { dockerCreateOptions, fencedSpec, networksToConnect, type ImageCommand } from './docker-container-config.ts';
import { isExclusiveContainer } from './labels.ts';
import { volumeMismatch, volumesWithOptions, type VolumeState } from './volume-options.ts';
import { describeEndpoint, resolveDockerEndpoint, type DockerEndpoint } from './docker-endpoint.ts';
import { DockerLogDecoder } from './docker-log-frames.ts';
import {
  RuntimeError, execOutputBytesMax, type ContainerInfo, type ContainerSpec, type ExecResult, type ImageEnsured, type ImageInfo, type Labels, type LogLine, type LogOptions, type LogReader,
  type RegistryAuth, type ResolvedImage, type Runtime, type RuntimeEvent,
} from './runtime.ts';
import { z } from 'zod';
import { imageRegistryHost } from '../resources/registry-logins.ts';
import { describePullFailure } from './pull-errors.ts';
import { PullProgressTracker, type PullProgress } from './pull-progress.ts';

/** Docker's answer to GET /distribution/{name}/json. */
const distributionSchema = z.object({
  Descriptor: z.object({ digest: z.string().regex(/^sha256:[0-9a-f]{64}$/) }).loose(),
  Platforms: z.array(z.object({ os: z.string(), architecture: z.string(), variant: z.string().optional() }).loose()).nullish(),
}).loose();

/** Docker's answer to GET /volumes/{name}: the driver and the DriverOpts it was created with (null: none). */
const volumeAnswer = z.object({
  Driver: z.string(),
  Options: z.record(z.string(), z.string()).nullish(),
}).loose();

export interface DockerRuntimeOptions {
  /** The daemon's unix socket; undefined = DOCKER_HOST, else /var/run/docker.sock. */
  socketPath?: string;
  /** Where DOCKER_HOST and DOCKER_TLS_VERIFY are read; default process.env. */
  env?: Record<string, string | undefined>;
  /** The timeout of one call (inspect, create, start, ...). */
  callTimeoutMs?: number;
  /** The timeout of ping(), shorter: it decides whether the node reports Docker as unavailable. */
  pingTimeoutMs?: number;
  /** The node's lease directory (lease-file.ts): exclusive containers run under its fence. Without it they cannot be created. */
  leaseDir?: string;
}

const callTimeoutMsDefault = 30_000;
const pingTimeoutMsDefault = 5_000;
/** Concurrent connections to the daemon (an event stream and stop waits each hold one). */
const socketsMax = 32;

/**
 * The Docker client's connection agent. docker-modem formats every request's options for a debug
 * line, whether or not debugging is on (`util.inspect(options, {showHidden: true, depth: null})`),
 * and the options hold this agent: inspected whole, with its sockets, that was most of a node's
 * CPU while it converged (bench:swarm's CPU profile, issue 44). It inspects as one short line.
 */
export class DockerAgent extends http.Agent {
  [inspect.custom](): string {
    return `DockerAgent(maxSockets ${this.maxSockets})`;
  }
}
/** Inspects in flight at once while listing. */
const listInspectsMax = 8;
/** One line of an event or pull stream; Docker's are well under 4 KiB. */
const streamLineBytesMax = 1 << 20;
/** An event subscription asks Docker to replay this much of its recent past, so events between
 *  the call and the stream's start are not lost (duplicates are harmless to a level-triggered agent). */
const eventsReplayMs = 1_000;

/** Socket errors that mean the daemon cannot be reached, as opposed to an answer it gave. */
const unreachableCodes = new Set([
  'ENOENT', 'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'EACCES', 'ENOTCONN', 'EHOSTUNREACH',
  'ENETUNREACH', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'ERR_STREAM_PREMATURE_CLOSE',
]);

type SignalOutcome = 'sent' | 'not_running' | 'absent';

export class DockerRuntime implements Runtime {
  readonly kind = 'docker';
  readonly endpoint: DockerEndpoint;
  private readonly docker: Docker;
  private readonly agent: http.Agent;
  private readonly callTimeoutMs: number;
  private readonly pingTimeoutMs: number;
  private readonly inflight = new Set<AbortController>();
  private readonly subscriptions = new Set<() => void>();
  private closed = false;
  private readonly leaseDir: string | undefined;

  /** Throws ShoalError('config_invalid') for a DOCKER_HOST it cannot use; connects lazily. */
  constructor(opts: DockerRuntimeOptions = {}) {
    this.endpoint = resolveDockerEndpoint({ socketPath: opts.socketPath, env: opts.env ?? process.env });
    this.callTimeoutMs = opts.callTimeoutMs ?? callTimeoutMsDefault;
    this.pingTimeoutMs = opts.pingTimeoutMs ?? pingTimeoutMsDefault;
    this.leaseDir = opts.leaseDir;
    if (!(this.callTimeoutMs > 0 && this.pingTimeoutMs > 0)) throw new RangeError('DockerRuntime timeouts must be positive');
    // No keep-alive: a pooled connection to a daemon that restarted fails on reuse, which would
    // read as "unavailable" once although Docker is back. A unix-socket connect costs little.
    this.agent = new DockerAgent({ keepAlive: false, maxSockets: socketsMax });
    const unix = this.endpoint.kind === 'unix' ? this.endpoint : undefined;
    const tcp = this.endpoint.kind === 'tcp' ? this.endpoint : undefined;
    // docker-modem reads DOCKER_HOST, DOCKER_CERT_PATH and DOCKER_CLIENT_TIMEOUT itself; every key
    // is given explicitly (undefined included) so that only the endpoint resolved above counts.
    // `agent` is a docker-modem option the typings omit.
    const options: Docker.DockerOptions & { agent: http.Agent } = {
      socketPath: unix?.socketPath, host: tcp?.host, port: tcp?.port, protocol: 'http',
      ca: undefined, cert: undefined, key: undefined, timeout: undefined, agent: this.agent,
    };
    try {
      this.docker = new Docker(options);
    } catch (err) {
      // It also throws on a DOCKER_HOST it cannot parse, or certificates it cannot read.
      throw new ShoalError('config_invalid', `the Docker client cannot start from this environment (DOCKER_HOST, DOCKER_CERT_PATH): ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  async ping(): Promise<void> {
    try {
      // dockerode's ping takes options (an abort signal) though its typings say it does not.
      const ping = this.docker.ping.bind(this.docker) as unknown as (opts: { abortSignal: AbortSignal }) => Promise<unknown>;
      await this.call('ping', this.pingTimeoutMs, (signal) => ping({ abortSignal: signal }));
    } catch (err) {
      // A daemon that does not answer in time is as unusable as one that is gone.
      const e = err as RuntimeError;
      throw e.kind === 'unavailable' ? e : new RuntimeError('unavailable', e.message);
    }
  }

  async list(labels: Labels): Promise<ContainerInfo[]> {
    const filters = { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
    const raw = await this.call('list containers', this.callTimeoutMs,
      (signal) => this.docker.listContainers({ all: true, filters, abortSignal: signal }));
    const ids = this.parse(containerSummarySchema.array(), raw, 'list containers').map((c) => c.Id);
    const found: ContainerInfo[] = [];
    for (let i = 0; i < ids.length; i += listInspectsMax) {
      const batch = await Promise.all(ids.slice(i, i + listInspectsMax).map((id) => this.inspect(id)));
      // One removed between the list and its inspect is simply gone.
      for (const info of batch) if (info !== undefined) found.push(info);
    }
    return found;
  }

  async ensureImage(image: string, timeoutMs: number, auth?: RegistryAuth, onProgress?: (p: PullProgress) => void): Promise<ImageEnsured> {
    if (image === '' || !(timeoutMs > 0)) throw new RangeError('ensureImage needs an image and a positive timeout');
    if (await this.imagePresent(image)) return 'present';
    const host = auth?.serveraddress ?? imageRegistryHost(image);
    try {
      await this.call(`pull ${image}`, timeoutMs, (signal) => this.pull(image, signal, auth, onProgress));
    } catch (err) {
      const e = err as RuntimeError;
      if (e.kind === 'unavailable') throw e;
      if (e.kind === 'timeout') throw new RuntimeError('image_pull_failed', `timeout: image ${image} is not on this node and was not pulled within ${timeoutMs} ms (a slow or silent registry at ${host})`);
      throw new RuntimeError('image_pull_failed', `image ${image} could not be pulled: ${describePullFailure(host, e.message).text}`);
    }
    if (!(await this.imagePresent(image))) {
      throw new RuntimeError('image_pull_failed', `image ${image}: the pull finished but the image is still absent`);
    }
    return 'pulled';
  }

  async resolveImage(image: string, timeoutMs: number, auth?: RegistryAuth): Promise<ResolvedImage | 'local'> {
    if (image === '' || !(timeoutMs > 0)) throw new RangeError('resolveImage needs an image and a positive timeout');
    const local = await this.call(`inspect image ${image}`, this.callTimeoutMs, async () => {
      try {
        return (await this.docker.getImage(image).inspect()) as { RepoDigests?: string[] | null };
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }
    });
    if (local !== undefined && (local.RepoDigests ?? []).length === 0) return 'local';
    const host = auth?.serveraddress ?? imageRegistryHost(image);
    const modem = this.docker.modem as { dial(opts: object, cb: (err: unknown, data: unknown) => void): void };
    try {
      const raw = await this.call(`resolve ${image}`, timeoutMs, (signal) => new Promise<unknown>((resolve, reject) => {
        modem.dial({
          path: `/distribution/${image}/json`, method: 'GET', abortSignal: signal, options: {},
          ...(auth !== undefined ? { authconfig: { ...auth } } : {}),
          statusCodes: { 200: true, 401: 'unauthorized', 403: 'forbidden', 404: 'not found', 500: 'server error' },
        }, (err, data) => (err !== null && err !== undefined ? reject(err) : resolve(data)));
      }));
      const d = this.parse(distributionSchema, raw, `resolve ${image}`);
      return { digest: d.Descriptor.digest, platforms: (d.Platforms ?? []).map((p) => ({ os: p.os, architecture: p.architecture, ...(p.variant !== undefined && p.variant !== '' ? { variant: p.variant } : {}) })) };
    } catch (err) {
      const e = err as RuntimeError;
      if (e.kind === 'unavailable') throw e;
      if (e.kind === 'timeout') throw new RuntimeError('image_pull_failed', `timeout: the registry at ${host} did not tell what ${image} is within ${timeoutMs} ms`);
      throw new RuntimeError('image_pull_failed', describePullFailure(host, e.message).text);
    }
  }

  async listImages(): Promise<ImageInfo[]> {
    const raw = await this.call('list images', this.callTimeoutMs, (signal) => this.docker.listImages({ abortSignal: signal }));
    return this.parse(imageSummarySchema.array(), raw, 'list images').map(toImageInfo);
  }

  async removeImage(ref: string): Promise<void> {
    if (ref === '') throw new RangeError('removeImage needs an image reference');
    await this.call(`remove image ${ref}`, this.callTimeoutMs, async (signal) => {
      try {
        // Never forced: Docker refuses (409) an image a container uses, which is what we want.
        await this.docker.getImage(ref).remove({ force: false, noprune: false, abortSignal: signal });
      } catch (err) {
        if (statusOf(err) !== 404) throw err;
      }
    });
  }

  async exec(id: string, argv: readonly string[], timeoutMs: number): Promise<ExecResult> {
    if (argv.length === 0) throw new RangeError('exec needs a command');
    return this.call(`exec in ${id}`, timeoutMs, async (signal) => {
      const container = this.docker.getContainer(id);
      const exec = await container.exec({ Cmd: [...argv], AttachStdout: true, AttachStderr: true, abortSignal: signal } as Docker.ExecCreateOptions);
      const stream = await exec.start({ hijack: true, stdin: false, abortSignal: signal } as Docker.ExecStartOptions);
      signal.addEventListener('abort', () => stream.destroy(), { once: true });
      const out = new TailSink();
      const err = new TailSink();
      this.docker.modem.demuxStream(stream, out, err);
      await new Promise<void>((resolve, reject) => {
        stream.on('end', resolve);
        stream.on('close', resolve);
        stream.on('error', reject);
      });
      const info = await exec.inspect({ abortSignal: signal } as object);
      return { exitCode: info.ExitCode ?? -1, stdout: out.text(), stderr: err.text() };
    });
  }

  async logs(id: string, opts: LogOptions): Promise<LogReader> {
    if ((opts.tailLines !== null && !(Number.isInteger(opts.tailLines) && opts.tailLines >= 0)) || (opts.sinceMs !== null && !(opts.sinceMs >= 0))) {
      throw new RangeError('logs needs tailLines and sinceMs null or at least 0');
    }
    const query = {
      stdout: true, stderr: true, timestamps: true, follow: opts.follow, tail: opts.tailLines === null ? 'all' : String(opts.tailLines),
      // Docker reads `since` as seconds with a fraction; 0 means from the start.
      ...(opts.sinceMs !== null ? { since: (opts.sinceMs / 1000).toFixed(3) } : {}),
    };
    // The stream outlives the call that opened it: it has its own abort, run by close() too.
    const ac = new AbortController();
    const stream = await this.call(`logs ${id}`, this.callTimeoutMs, (signal) => {
      signal.addEventListener('abort', () => ac.abort(), { once: true });
      return this.dialStream(`/containers/${encodeURIComponent(id)}/logs?`, query, ac.signal);
    });
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      this.subscriptions.delete(close);
      ac.abort();
      stream.destroy();
    };
    if (this.closed) close();
    else this.subscriptions.add(close);
    const lines = this.readLogStream(stream, id, () => closed, close);
    return { [Symbol.asyncIterator]: () => lines, close };
  }

  async create(given: ContainerSpec): Promise<string> {
    const spec = isExclusiveContainer(given.labels) ? await this.fenced(given) : given;
    const { name, ...body } = dockerCreateOptions(spec);
    await this.ensureVolumes(spec);
    try {
      const container = await this.call(`create ${spec.name}`, this.callTimeoutMs, (signal) =>
        // _query/_body keep the config out of the URL (dockerode would put it in both).
        this.docker.createContainer({ _query: { name }, _body: body, abortSignal: signal } as unknown as Docker.ContainerCreateOptions));
      await this.connectNetworks(container.id, spec);
      return container.id;
    } catch (err) {
      const e = err as RuntimeError;
      // A 404 here is the image, not a container: not_found would tell the agent the wrong thing.
      if (e.kind === 'not_found') throw new RuntimeError('failed', `${e.message} (the image must be present: ensureImage first)`);
      throw e;
    }
  }

  /**
   * Creates each named volume whose mount gives options (the local driver, its DriverOpts)
   * before the container, which would create it without them; an existing one is used only when
   * it was made with exactly these (volume-options.ts), else the create fails with
   * volume_options_differ and nothing is created.
   */
  private async ensureVolumes(spec: ContainerSpec): Promise<void> {
    for (const [volume, options] of volumesWithOptions(spec.mounts)) {
      let state = await this.inspectVolume(volume);
      if (state === undefined) {
        await this.call(`create volume ${volume}`, this.callTimeoutMs, (signal) =>
          this.docker.createVolume({ Name: volume, Driver: 'local', DriverOpts: options, abortSignal: signal } as unknown as Docker.VolumeCreateOptions));
        // Read back: another creator (a task of another service, a person) may have been first.
        state = await this.inspectVolume(volume);
        if (state === undefined) throw new RuntimeError('failed', `create volume ${volume}: Docker created it, and then it was gone`);
      }
      const mismatch = volumeMismatch(volume, options, state);
      if (mismatch !== null) throw new RuntimeError('volume_options_differ', mismatch);
    }
  }

  private async inspectVolume(volume: string): Promise<VolumeState | undefined> {
    try {
      const raw = await this.call(`inspect volume ${volume}`, this.callTimeoutMs, (signal) =>
        this.docker.getVolume(volume).inspect({ abortSignal: signal }) as Promise<unknown>);
      const v = this.parse(volumeAnswer, raw, `inspect volume ${volume}`);
      return { driver: v.Driver, options: v.Options ?? {} };
    } catch (err) {
      if ((err as RuntimeError).kind === 'not_found') return undefined;
      throw err;
    }
  }

  /**
   * Connects a new container to its overlay networks after the first, before it starts. A
   * failure removes the container (it would start half attached) and fails the create.
   */
  private async connectNetworks(id: string, spec: ContainerSpec): Promise<void> {
    for (const { network, endpoint } of networksToConnect(spec)) {
      try {
        // Docker 20.10 accepts connecting a created container to a network that does not exist
        // (the start fails later): ask first, so the create fails saying which.
        await this.call(`inspect network ${network}`, this.callTimeoutMs, () => this.docker.getNetwork(network).inspect() as Promise<unknown>);
        await this.call(`connect ${spec.name} to ${network}`, this.callTimeoutMs, (signal) =>
          this.docker.getNetwork(network).connect({ Container: id, EndpointConfig: endpoint, abortSignal: signal } as Docker.NetworkConnectOptions));
      } catch (err) {
        await this.remove(id).catch(() => undefined);
        const e = err as RuntimeError;
        throw e.kind === 'not_found' ? new RuntimeError('failed', `${e.message} (the Docker network ${network} does not exist on this node)`) : e;
      }
    }
  }

  /** An exclusive task's spec under the fence; what the image runs is read when the spec leaves it to the image. */
  private async fenced(spec: ContainerSpec): Promise<ContainerSpec> {
    if (this.leaseDir === undefined) throw new RuntimeError('failed', `${spec.name} is an exclusive task, and this runtime has no lease directory for its fence`);
    let image: ImageCommand = { entrypoint: null, cmd: null };
    if (spec.command === null) {
      const raw = await this.call(`inspect image ${spec.image}`, this.callTimeoutMs, () => this.docker.getImage(spec.image).inspect());
      // A string entrypoint is Docker's shell form; the fence runs it the same way.
      const list = (v: string | string[] | null | undefined): string[] | null => (v === undefined || v === null ? null : typeof v === 'string' ? ['/bin/sh', '-c', v] : v);
      image = { entrypoint: list(raw.Config.Entrypoint), cmd: list(raw.Config.Cmd) };
    }
    try {
      return fencedSpec(spec, this.leaseDir, image);
    } catch (err) {
      throw new RuntimeError('failed', (err as Error).message);
    }
  }

  async start(id: string): Promise<void> {
    await this.call(`start ${id}`, this.callTimeoutMs, async (signal) => {
      try {
        await this.docker.getContainer(id).start({ abortSignal: signal });
      } catch (err) {
        if (statusOf(err) !== 304) throw err; // 304: already running
      }
    });
  }

  async stop(id: string, opts: { signal: string; graceMs: number }): Promise<void> {
    if (!(opts.graceMs >= 0) || opts.signal === '') throw new RangeError('stop needs a signal and a grace period >= 0');
    const info = await this.inspect(id);
    if (info === undefined || !['running', 'paused', 'restarting'].includes(info.state)) return;
    // A paused container cannot handle the signal: it would sit until the SIGKILL.
    if (info.state === 'paused') await this.unpause(id);
    if ((await this.sendSignal(id, opts.signal)) !== 'sent') return;
    if (await this.waitExited(id, opts.graceMs)) return;
    if ((await this.sendSignal(id, 'SIGKILL')) !== 'sent') return;
    if (!(await this.waitExited(id, this.callTimeoutMs))) {
      throw new RuntimeError('timeout', `stop ${id}: still running ${this.callTimeoutMs} ms after SIGKILL`);
    }
  }

  async kill(id: string, signal: string): Promise<void> {
    if ((await this.sendSignal(id, signal)) === 'absent') throw new RuntimeError('not_found', `kill ${id}: no such container`);
  }

  async remove(id: string): Promise<void> {
    await this.call(`remove ${id}`, this.callTimeoutMs, async (signal) => {
      try {
        // v: anonymous volumes go with the container (an image's VOLUME would otherwise pile up).
        await this.docker.getContainer(id).remove({ force: true, v: true, abortSignal: signal } as Docker.ContainerRemoveOptions);
      } catch (err) {
        const s = statusOf(err);
        if (s === 404) return;
        if (s === 409 && /already in progress/i.test(dockerMessage(err))) return;
        throw err;
      }
    });
  }

  async inspect(id: string): Promise<ContainerInfo | undefined> {
    let raw: unknown;
    try {
      raw = await this.call(`inspect ${id}`, this.callTimeoutMs, (signal) => this.docker.getContainer(id).inspect({ abortSignal: signal }));
    } catch (err) {
      if ((err as RuntimeError).kind === 'not_found') return undefined;
      throw err;
    }
    return toContainerInfo(this.parse(containerInspectSchema, raw, `inspect ${id}`));
  }

  events(labels: Labels, onEvent: (e: RuntimeEvent) => void, onError: (err: RuntimeError) => void): () => void {
    const ac = new AbortController();
    let stream: Readable | undefined;
    let done = false;
    const stop = (): void => {
      if (done) return;
      done = true;
      clearTimeout(connectTimer);
      this.subscriptions.delete(stop);
      ac.abort();
      stream?.destroy();
    };
    // Every way a subscription ends, other than unsubscribing, is Docker going away for the agent.
    const fail = (err: unknown): void => {
      if (done) return;
      stop();
      onError(new RuntimeError('unavailable', `events: ${this.toRuntimeError(err, 'the Docker event stream broke').message}`));
    };
    const connectTimer = setTimeout(() => fail(new Error(`no answer within ${this.callTimeoutMs} ms`)), this.callTimeoutMs);
    if (this.closed) {
      queueMicrotask(() => fail(new Error('the runtime is closed')));
      return stop;
    }
    this.subscriptions.add(stop);
    const filters = { type: ['container' as const], event: [...subscribedActions], label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
    const since = Math.floor(Date.now() - eventsReplayMs) / 1000;
    this.docker.getEvents({ since, filters, abortSignal: ac.signal }).then((s) => {
      clearTimeout(connectTimer);
      stream = s as Readable;
      if (done) return void stream.destroy();
      consumeJsonLines(stream, (value) => {
        const parsed = dockerEventSchema.safeParse(value);
        const event = parsed.success ? toRuntimeEvent(parsed.data) : undefined;
        if (event !== undefined && !done) onEvent(event);
      }).then(() => fail(new Error('the stream ended')), fail);
    }, fail);
    return stop;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const unsubscribe of [...this.subscriptions]) unsubscribe();
    for (const ac of this.inflight) ac.abort();
    this.agent.destroy();
  }

  /** Lines of a log stream; a stream closed by the reader ends quietly, one that broke ends with `unavailable`. */
  private async *readLogStream(stream: Readable, id: string, isClosed: () => boolean, close: () => void): AsyncGenerator<LogLine, void, undefined> {
    const decoder = new DockerLogDecoder(Date.now);
    try {
      for await (const chunk of stream) {
        for (const line of decoder.push(chunk as Buffer)) yield line;
      }
      if (!isClosed()) yield* decoder.end();
    } catch (err) {
      if (isClosed()) return;
      const e = this.toRuntimeError(err, `logs ${id}`);
      throw e.kind === 'failed' ? e : new RuntimeError('unavailable', `logs ${id}: the Docker log stream broke: ${e.message}`);
    } finally {
      close();
    }
  }

  /** A GET whose answer is a stream, whatever the query (dockerode buffers a log read unless it follows). */
  private dialStream(path: string, query: Record<string, string | boolean>, signal: AbortSignal): Promise<Readable> {
    const modem = this.docker.modem as { dial(opts: object, cb: (err: unknown, data: unknown) => void): void };
    return new Promise((resolve, reject) => {
      modem.dial({
        path, method: 'GET', isStream: true, abortSignal: signal, options: query,
        statusCodes: { 200: true, 404: 'no such container', 500: 'server error' },
      }, (err, data) => (err !== null && err !== undefined ? reject(err) : resolve(data as Readable)));
    });
  }

  /** Runs one daemon call under a timeout; every failure comes out as a RuntimeError. */
  private async call<T>(what: string, timeoutMs: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    if (this.closed) throw new RuntimeError('unavailable', `${what}: the Docker runtime is closed`);
    const ac = new AbortController();
    this.inflight.add(ac);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new RuntimeError('timeout', `${what}: Docker (${describeEndpoint(this.endpoint)}) did not answer within ${timeoutMs} ms`));
        ac.abort();
      }, timeoutMs);
    });
    try {
      return await Promise.race([Promise.resolve().then(() => fn(ac.signal)), deadline]);
    } catch (err) {
      throw this.toRuntimeError(err, what);
    } finally {
      clearTimeout(timer);
      this.inflight.delete(ac);
    }
  }

  private toRuntimeError(err: unknown, what: string): RuntimeError {
    if (err instanceof RuntimeError) return err;
    if (this.closed) return new RuntimeError('unavailable', `${what}: the Docker runtime is closed`);
    const code = (err as { code?: unknown } | null)?.code;
    const message = err instanceof Error ? err.message : String(err);
    if (typeof code === 'string' && unreachableCodes.has(code)) {
      const hint = code === 'ENOENT' ? ' (no socket there: is Docker installed and running?)'
        : code === 'EACCES' ? ' (permission denied: run shoal as root or in the docker group)' : '';
      return new RuntimeError('unavailable', `${what}: Docker is unavailable at ${describeEndpoint(this.endpoint)}: ${code}${hint}`);
    }
    const status = statusOf(err);
    if (status === 404) return new RuntimeError('not_found', `${what}: ${dockerMessage(err)}`);
    if (status !== undefined) return new RuntimeError('failed', `${what}: ${dockerMessage(err)}`);
    return new RuntimeError('failed', `${what}: ${message}`);
  }

  private parse<S extends z.ZodType>(schema: S, raw: unknown, what: string): z.infer<S> {
    const r = schema.safeParse(raw);
    if (!r.success) throw new RuntimeError('failed', `${what}: unexpected answer from Docker: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    return r.data;
  }

  async imagePresent(image: string): Promise<boolean> {
    return this.call(`inspect image ${image}`, this.callTimeoutMs, async () => {
      try {
        await this.docker.getImage(image).inspect();
        return true;
      } catch (err) {
        if (statusOf(err) === 404) return false;
        throw err;
      }
    });
  }

  /** Pulls, reading the progress stream to its end; an error line in it fails the pull (with the registry's answer as its message). */
  private async pull(image: string, signal: AbortSignal, auth: RegistryAuth | undefined, onProgress: ((p: PullProgress) => void) | undefined): Promise<void> {
    const opts = { abortSignal: signal, ...(auth !== undefined ? { authconfig: { ...auth } } : {}) };
    const stream = (await this.docker.pull(image, opts)) as Readable;
    signal.addEventListener('abort', () => stream.destroy(), { once: true });
    let failure: string | undefined;
    const progress = new PullProgressTracker();
    await consumeJsonLines(stream, (line) => {
      const error = (line as { error?: unknown } | null)?.error;
      if (typeof error === 'string') failure ??= error;
      if (onProgress !== undefined && progress.add(line)) onProgress(progress.progress);
    });
    if (failure !== undefined) throw new RuntimeError('failed', failure);
  }

  private async sendSignal(id: string, signal: string): Promise<SignalOutcome> {
    return this.call(`kill ${id} with ${signal}`, this.callTimeoutMs, async (abortSignal) => {
      try {
        await this.docker.getContainer(id).kill({ signal, abortSignal });
        return 'sent';
      } catch (err) {
        const s = statusOf(err);
        if (s === 404) return 'absent';
        if (s === 409 && /not running/i.test(dockerMessage(err))) return 'not_running';
        throw err;
      }
    });
  }

  private async unpause(id: string): Promise<void> {
    await this.call(`unpause ${id}`, this.callTimeoutMs, async (signal) => {
      try {
        await this.docker.getContainer(id).unpause({ abortSignal: signal });
      } catch (err) {
        if (statusOf(err) !== 404 && statusOf(err) !== 409) throw err; // gone, or no longer paused
      }
    });
  }

  /** True once the container is not running (or gone); false if it still runs after `ms`. */
  private async waitExited(id: string, ms: number): Promise<boolean> {
    if (ms <= 0) return false;
    try {
      await this.call(`wait for ${id}`, ms, (signal) => this.docker.getContainer(id).wait({ condition: 'not-running', abortSignal: signal }));
      return true;
    } catch (err) {
      const e = err as RuntimeError;
      if (e.kind === 'timeout') return false;
      if (e.kind === 'not_found') return true;
      throw e;
    }
  }
}

function statusOf(err: unknown): number | undefined {
  const s = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof s === 'number' ? s : undefined;
}

/** Docker's own words (`{"message": ...}`), without dockerode's "(HTTP code 404) ..." wrapping. */
function dockerMessage(err: unknown): string {
  const json = (err as { json?: unknown } | null)?.json;
  const m = (json as { message?: unknown } | null)?.message;
  if (typeof m === 'string' && m !== '') return m;
  return err instanceof Error ? err.message.trim() : String(err);
}

/**
 * Reads newline-separated JSON values from `stream`, calling `onValue` for each; resolves at
 * the end of the stream, rejects on a stream error, a close before the end, or an oversized line.
 * A line that is not JSON is skipped.
 */
function consumeJsonLines(stream: Readable, onValue: (value: unknown) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let buf = '';
    let ended = false;
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line === '') continue;
        let value: unknown;
        try {
          value = JSON.parse(line);
        } catch {
          continue;
        }
        onValue(value);
      }
      if (buf.length > streamLineBytesMax) stream.destroy(new Error(`a stream line longer than ${streamLineBytesMax} bytes`));
    });
    stream.once('end', () => { ended = true; resolve(); });
    stream.once('error', reject);
    stream.once('close', () => { if (!ended) reject(Object.assign(new Error('the stream closed early'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })); });
  });
}

/** A writable that keeps the last execOutputBytesMax bytes written to it. */
class TailSink extends Writable {
  private buf = Buffer.alloc(0);

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.buf = Buffer.concat([this.buf, chunk]);
    if (this.buf.length > execOutputBytesMax) this.buf = this.buf.subarray(this.buf.length - execOutputBytesMax);
    cb();
  }

  text(): string {
    return this.buf.toString('utf8');
  }
}
