// The Runtime port in memory, with fault injection: for tests, the control-plane simulator and
// `shoal dev --runtime memory` demos. Containers are records that move through the same states
// as Docker's; time comes from an injected Clock, ids from a counter, so a run is a function of
// its inputs (the calls, the clock, the faults injected).
//
// What can be injected:
// - behaviour per container, chosen by a matcher on its spec when it starts (`program`): exit
//   by itself after a delay with a code, fail to start, ignore the stop signal (then stop waits
//   the grace period and kills it, exit 137), a health check that passes, fails or holds;
// - exits, OOM kills and health verdicts on command (`exit`, `setHealth`);
// - images present, pullable (after a delay) or absent (the pull fails once the caller's
//   timeout has passed, as a pull from a registry nothing answers for);
// - a runtime that is unavailable (every call rejects with 'unavailable', event streams break)
//   or hangs (matching calls wait until released, then run);
// - log lines a container writes (`writeLog`); the runtime itself writes one when a container
//   starts and one when it exits, so a log is never empty once a container ran.
//
// Several nodes may share one MemoryRuntime, as three nodes share one Docker daemon in
// `shoal dev`: list and events filter by labels, and the labels keep the nodes apart.

import type { Clock, Timer } from './clock.ts';
import { LogQueue } from './log-queue.ts';
import {
  RuntimeError, type ContainerInfo, type ContainerSpec, type HealthState, type ImageEnsured, type ImageInfo, type Labels, type LogLine,
  type LogOptions, type LogReader, type LogStream, type ImagePlatform, type RegistryAuth, type ResolvedImage, type Runtime, type RuntimeEvent, type RuntimeEventType,
} from './runtime.ts';
import { imageRegistryHost } from '../resources/registry-logins.ts';
import { describePullFailure } from './pull-errors.ts';
import type { PullProgress } from './pull-progress.ts';
import { volumeMismatch, volumesWithOptions, type VolumeState } from './volume-options.ts';

export interface ContainerBehaviour {
  /** Exits by itself this long after each start (0: at once, before start returns); null = runs until stopped. */
  exitAfterMs: number | null;
  /** The code of an exit by itself. */
  exitCode: number;
  /** pass: healthy one interval after start; fail: unhealthy after startPeriod + retries intervals; hold: starting until setHealth. */
  health: 'pass' | 'fail' | 'hold';
  /** Ignores the stop signal: stop waits the grace period, then kills (exit 137). */
  ignoresStopSignal: boolean;
  /** The exit code when it honours the stop signal. */
  stopExitCode: number;
  /** start() fails with this message (a bad mount, a device that does not exist); null = starts. */
  startError: string | null;
}

export const defaultBehaviour: ContainerBehaviour = {
  exitAfterMs: null, exitCode: 0, health: 'pass', ignoresStopSignal: false, stopExitCode: 0, startError: null,
};

export type RuntimeOp = 'ping' | 'list' | 'ensureImage' | 'imagePresent' | 'listImages' | 'removeImage' | 'create' | 'start' | 'stop' | 'kill' | 'remove' | 'inspect' | 'logs';

/** What a hang's filter sees of a call. */
export interface RuntimeCall {
  op: RuntimeOp;
  /** The container the call is about (start, stop, kill, remove, inspect, logs); null otherwise. */
  containerId: string | null;
  /** The image (ensureImage, imagePresent, removeImage, create); null otherwise. */
  image: string | null;
  /** The container's name (create); null otherwise. */
  name: string | null;
}

export interface Hang {
  /** Lets the held calls (and any later matching ones) run; idempotent. */
  release(): void;
  /** Calls held right now. */
  readonly held: number;
}

export interface MemoryRuntimeOptions {
  clock: Clock;
  /** Images present at the start. */
  images?: string[];
  /** Images a pull finds (present after pullDelayMs). */
  pullable?: string[];
  pullDelayMs?: number;
  /** Every image a pull asks for is found (demos: `runtime: memory` on a node), except names starting with `absent/`. */
  pullAny?: boolean;
  /** Container ids are `<idPrefix><12 hex digits>`; distinct prefixes keep runtimes' ids apart in a simulation. */
  idPrefix?: string;
  /** Events kept for history(); the oldest are dropped beyond it. */
  historyMax?: number;
  /** Log lines kept per container (its "rotation"), and unread lines a log reader may fall behind. */
  logLinesMax?: number;
}

interface MemContainer {
  info: ContainerInfo;
  spec: ContainerSpec;
  /** The id of the image it was created from (an image a container uses cannot be removed). */
  imageId: string;
  timers: Set<Timer>;
  exitWaiters: (() => void)[];
  log: LogLine[];
  followers: Set<LogQueue>;
}

interface Subscriber {
  labels: Labels;
  onEvent: (e: RuntimeEvent) => void;
  onError: (err: RuntimeError) => void;
  active: boolean;
}

interface HangState {
  filter: (c: RuntimeCall) => boolean;
  active: boolean;
  waiters: (() => void)[];
}

/** The exit code of a container killed by SIGKILL (128 + 9), as Docker reports it. */
export const killedExitCode = 137;

export function matchesLabels(have: Labels, want: Labels): boolean {
  for (const [k, v] of Object.entries(want)) if (have[k] !== v) return false;
  return true;
}

export class MemoryRuntime implements Runtime {
  readonly kind = 'memory';
  private readonly clock: Clock;
  private readonly containersById = new Map<string, MemContainer>();
  /** Image references and the image id each names (several references may name one image). */
  private readonly images = new Map<string, string>();
  private readonly pullable = new Set<string>();
  /** Named volumes by name (created by a container that mounts one, or addVolume). */
  private readonly volumes = new Map<string, VolumeState>();
  private readonly published = new Map<string, ResolvedImage>();
  private readonly logins = new Map<string, { username: string; password: string }>();
  /** Every pull asked for, with the credentials it was given (null: none); for tests of registry logins. */
  readonly pullAuths: Array<{ image: string; auth: RegistryAuth | null }> = [];
  private readonly pullDelayMs: number;
  private readonly pullAny: boolean;
  private readonly idPrefix: string;
  private readonly historyMax: number;
  private readonly logLinesMax: number;
  private readonly rules: { match: (spec: ContainerSpec) => boolean; behaviour: Partial<ContainerBehaviour> }[] = [];
  private subscribers: Subscriber[] = [];
  private hangs: HangState[] = [];
  private eventLog: RuntimeEvent[] = [];
  private unavailable: string | null = null;
  private closed = false;
  private seq = 0;
  private imageSeq = 0;

  constructor(opts: MemoryRuntimeOptions) {
    this.clock = opts.clock;
    for (const i of opts.images ?? []) this.addImage(i);
    for (const i of opts.pullable ?? []) this.pullable.add(i);
    this.pullDelayMs = opts.pullDelayMs ?? 0;
    this.pullAny = opts.pullAny ?? false;
    this.idPrefix = opts.idPrefix ?? '';
    this.historyMax = opts.historyMax ?? 100_000;
    this.logLinesMax = opts.logLinesMax ?? 10_000;
  }

  // ---- fault injection and inspection (not part of the port) ----

  /** Containers whose spec `match`es behave as `behaviour` says from their next start (later rules win per field). */
  program(match: (spec: ContainerSpec) => boolean, behaviour: Partial<ContainerBehaviour>): void {
    this.rules.push({ match, behaviour });
  }

  /**
   * The image is on the runtime from now on, as if loaded by hand (not pulled). With `sameAs`, it
   * is another reference to that image (a tag); without, a new image (a reference already there
   * now names a new one, as after a rebuild under the same tag). Returns its id.
   */
  addImage(image: string, sameAs?: string): string {
    const existing = sameAs === undefined ? undefined : this.images.get(sameAs);
    if (sameAs !== undefined && existing === undefined) throw new RangeError(`addImage: no image ${sameAs} to tag`);
    const id = existing ?? `sha256:${(++this.imageSeq).toString(16).padStart(64, '0')}`;
    this.images.set(image, id);
    return id;
  }

  /** Pulls from `host` need this user name and password from now on, as a private registry's do (the image must still be pullable). */
  requireLogin(host: string, username: string, password: string): void {
    this.logins.set(host, { username, password });
  }

  allowPull(image: string): void {
    this.pullable.add(image);
  }

  hasImage(image: string): boolean {
    return this.images.has(image);
  }

  /** The container writes `text` (one line per newline in it) on `stream`, stamped now. */
  writeLog(id: string, stream: LogStream, text: string): void {
    const c = this.containersById.get(id);
    if (c === undefined) throw new RangeError(`writeLog: no container ${id}`);
    for (const line of text.split('\n')) this.appendLog(c, stream, line);
  }

  /** The container exits now with `code` (`oom`: as killed for memory). A container not running: nothing. */
  exit(id: string, code: number, opts: { oom?: boolean } = {}): void {
    const c = this.containersById.get(id);
    if (c !== undefined) this.exitContainer(c, code, opts.oom === true ? 'OOM-killed' : null);
  }

  /** The health check's verdict changes now (a running container with a health check). */
  setHealth(id: string, health: HealthState): void {
    const c = this.containersById.get(id);
    if (c === undefined || c.info.state !== 'running' || c.info.health === null || c.info.health === health) return;
    c.info.health = health;
    this.emit('health', c, { health });
  }

  /** Every call rejects with RuntimeError('unavailable', message) and every event stream breaks, until setAvailable(). */
  setUnavailable(message: string): void {
    this.unavailable = message;
    const subs = this.subscribers;
    this.subscribers = [];
    for (const s of subs) {
      if (!s.active) continue;
      s.active = false;
      queueMicrotask(() => s.onError(new RuntimeError('unavailable', message)));
    }
  }

  setAvailable(): void {
    this.unavailable = null;
  }

  /** Calls matching `filter` (every call when omitted) wait until release(), then run. */
  hang(filter: (c: RuntimeCall) => boolean = () => true): Hang {
    const h: HangState = { filter, active: true, waiters: [] };
    this.hangs.push(h);
    return {
      release: () => {
        if (!h.active) return;
        h.active = false;
        this.hangs = this.hangs.filter((x) => x !== h);
        for (const w of h.waiters.splice(0)) w();
      },
      get held() {
        return h.waiters.length;
      },
    };
  }

  /** A named volume exists from now on, as if made by hand (`docker volume create`). */
  addVolume(name: string, options: Record<string, string> = {}, driver = 'local'): void {
    this.volumes.set(name, { driver, options: { ...options } });
  }

  /** A named volume (a copy), or undefined when there is none. */
  volume(name: string): VolumeState | undefined {
    const v = this.volumes.get(name);
    return v === undefined ? undefined : { driver: v.driver, options: { ...v.options } };
  }

  /** As Docker does: a volume with options is made with them, or refused when it exists otherwise; any other is made when missing. */
  private ensureVolumes(spec: ContainerSpec): void {
    for (const [name, options] of volumesWithOptions(spec.mounts)) {
      const existing = this.volumes.get(name);
      if (existing === undefined) this.volumes.set(name, { driver: 'local', options: { ...options } });
      else {
        const mismatch = volumeMismatch(name, options, existing);
        if (mismatch !== null) throw new RuntimeError('volume_options_differ', mismatch);
      }
    }
    for (const m of spec.mounts) if (m.type === 'volume' && !this.volumes.has(m.source)) this.volumes.set(m.source, { driver: 'local', options: {} });
  }

  /** Every container of every node, in creation order (copies). */
  all(): ContainerInfo[] {
    return [...this.containersById.values()].map((c) => copyInfo(c.info));
  }

  /** The spec a container was created with (a copy), networks and DNS included; undefined when it does not exist. */
  specOf(id: string): ContainerSpec | undefined {
    const c = this.containersById.get(id);
    return c === undefined ? undefined : structuredClone(c.spec);
  }

  /** Every event emitted so far (at most historyMax, the newest), in order. */
  history(): RuntimeEvent[] {
    return this.eventLog.map((e) => ({ ...e, labels: { ...e.labels } }));
  }

  // ---- the port ----

  ping(): Promise<void> {
    return this.call({ op: 'ping', containerId: null, image: null, name: null }, () => undefined);
  }

  list(labels: Labels): Promise<ContainerInfo[]> {
    return this.call({ op: 'list', containerId: null, image: null, name: null }, () =>
      [...this.containersById.values()].filter((c) => matchesLabels(c.info.labels, labels)).map((c) => copyInfo(c.info)));
  }

  ensureImage(image: string, timeoutMs: number, auth?: RegistryAuth, onProgress?: (p: PullProgress) => void): Promise<ImageEnsured> {
    return this.call({ op: 'ensureImage', containerId: null, image, name: null }, async (): Promise<ImageEnsured> => {
      if (this.images.has(image)) return 'present';
      this.pullAuths.push({ image, auth: auth === undefined ? null : { ...auth } });
      const host = imageRegistryHost(image);
      const login = this.logins.get(host);
      if (login !== undefined && (auth?.username !== login.username || auth.password !== login.password)) {
        throw new RuntimeError('image_pull_failed', `image ${image} could not be pulled: ${describePullFailure(host, `unauthorized: authentication required (registry ${host})`).text}`);
      }
      if ((this.pullable.has(image) || (this.pullAny && !image.startsWith('absent/'))) && this.pullDelayMs <= timeoutMs) {
        // One layer of 10 MB, half of it at once, the rest when the delay has passed.
        if (this.pullDelayMs > 0) onProgress?.({ layers: 1, layersDone: 0, bytes: 5_000_000, bytesTotal: 10_000_000 });
        await this.sleep(this.pullDelayMs);
        if (this.pullDelayMs > 0) onProgress?.({ layers: 1, layersDone: 1, bytes: 10_000_000, bytesTotal: 10_000_000 });
        // Two pulls of one image at once: the second finds it there, as Docker's would.
        if (this.images.has(image)) return 'present';
        this.addImage(image);
        return 'pulled';
      }
      await this.sleep(timeoutMs);
      throw new RuntimeError('image_pull_failed', `pulling ${image}: no registry answered within ${timeoutMs} ms`);
    });
  }

  resolveImage(image: string, _timeoutMs: number, auth?: RegistryAuth): Promise<ResolvedImage | 'local'> {
    return this.call({ op: 'ensureImage', containerId: null, image, name: null }, (): ResolvedImage | 'local' => {
      const host = imageRegistryHost(image);
      const login = this.logins.get(host);
      if (login !== undefined && (auth?.username !== login.username || auth.password !== login.password)) {
        throw new RuntimeError('image_pull_failed', describePullFailure(host, `unauthorized: authentication required (registry ${host})`).text);
      }
      const name = image.includes('@') ? image.slice(0, image.indexOf('@')) : image;
      const published = this.published.get(name);
      if (published !== undefined) return { digest: published.digest, platforms: published.platforms.map((p) => ({ ...p })) };
      if (this.images.has(image) || this.pullable.has(image) || (this.pullAny && !image.startsWith('absent/'))) return 'local';
      throw new RuntimeError('image_pull_failed', describePullFailure(host, `Get "https://${host}/v2/": dial tcp: lookup ${host}: no such host`).text);
    });
  }

  /** What the registry says `ref` (a tag) names from now on: resolveImage answers it, and a pull of `ref@digest` finds it. */
  publish(ref: string, digest: string, platforms: ImagePlatform[] = [{ os: 'linux', architecture: 'amd64' }]): void {
    this.published.set(ref, { digest, platforms });
    this.pullable.add(`${ref}@${digest}`);
  }

  imagePresent(image: string): Promise<boolean> {
    return this.call({ op: 'imagePresent', containerId: null, image, name: null }, () => this.images.has(image));
  }

  listImages(): Promise<ImageInfo[]> {
    return this.call({ op: 'listImages', containerId: null, image: null, name: null }, () => {
      const byId = new Map<string, string[]>();
      for (const [ref, id] of this.images) byId.set(id, [...(byId.get(id) ?? []), ref]);
      return [...byId].map(([id, refs]) => ({ id, refs }));
    });
  }

  removeImage(ref: string): Promise<void> {
    return this.call({ op: 'removeImage', containerId: null, image: ref, name: null }, () => {
      const id = this.images.get(ref);
      if (id === undefined) return;
      const lastRef = ![...this.images].some(([r, i]) => i === id && r !== ref);
      const user = lastRef ? [...this.containersById.values()].find((c) => c.imageId === id) : undefined;
      if (user !== undefined) {
        throw new RuntimeError('failed', `conflict: unable to remove repository reference "${ref}" (must force) - container ${user.info.id} is using its referenced image ${id}`);
      }
      this.images.delete(ref);
    });
  }

  create(spec: ContainerSpec): Promise<string> {
    return this.call({ op: 'create', containerId: null, image: spec.image, name: spec.name }, () => {
      const imageId = this.images.get(spec.image);
      if (imageId === undefined) throw new RuntimeError('failed', `No such image: ${spec.image}`);
      for (const c of this.containersById.values()) {
        if (c.info.name === spec.name) throw new RuntimeError('failed', `Conflict. The container name "/${spec.name}" is already in use by container "${c.info.id}"`);
      }
      this.ensureVolumes(spec);
      const id = `${this.idPrefix}${(++this.seq).toString(16).padStart(12, '0')}`;
      const info: ContainerInfo = {
        id, name: spec.name, image: spec.image, labels: { ...spec.labels }, state: 'created', exitCode: null,
        startedAt: null, finishedAt: null, health: null, error: null,
      };
      const c: MemContainer = { info, spec: structuredClone(spec), imageId, timers: new Set(), exitWaiters: [], log: [], followers: new Set() };
      this.containersById.set(id, c);
      this.emit('create', c, {});
      return id;
    });
  }

  start(id: string): Promise<void> {
    return this.call({ op: 'start', containerId: id, image: null, name: null }, () => {
      const c = this.mustGet(id);
      if (c.info.state === 'running') return;
      const b = this.behaviourFor(c.spec);
      if (b.startError !== null) {
        c.info.error = b.startError;
        throw new RuntimeError('failed', b.startError);
      }
      Object.assign(c.info, {
        state: 'running', exitCode: null, startedAt: this.clock.wallNow(), error: null,
        health: c.spec.healthCheck === null ? null : 'starting',
      } satisfies Partial<ContainerInfo>);
      this.emit('start', c, {});
      this.appendLog(c, 'stdout', 'shoal memory runtime: container started');
      // A program that exits at once has exited by the time start returns (as a real one may
      // have before anyone looks): nobody sees it running.
      if (b.exitAfterMs === 0) {
        this.exitContainer(c, b.exitCode, null);
        return;
      }
      if (b.exitAfterMs !== null) this.after(c, b.exitAfterMs, () => this.exitContainer(c, b.exitCode, null));
      this.scheduleHealth(c, b);
    });
  }

  stop(id: string, opts: { signal: string; graceMs: number }): Promise<void> {
    return this.call({ op: 'stop', containerId: id, image: null, name: null }, async () => {
      const c = this.mustGet(id);
      if (c.info.state !== 'running') return;
      const exited = new Promise<void>((resolve) => c.exitWaiters.push(resolve));
      const b = this.behaviourFor(c.spec);
      if (opts.signal === 'SIGKILL') this.exitContainer(c, killedExitCode, null);
      else if (!b.ignoresStopSignal) this.exitContainer(c, b.stopExitCode, null);
      else this.after(c, opts.graceMs, () => this.exitContainer(c, killedExitCode, null));
      await exited;
    });
  }

  kill(id: string, signal: string): Promise<void> {
    return this.call({ op: 'kill', containerId: id, image: null, name: null }, () => {
      const c = this.mustGet(id);
      if (c.info.state !== 'running') throw new RuntimeError('failed', `container ${id} is not running`);
      const b = this.behaviourFor(c.spec);
      if (signal === 'SIGKILL') this.exitContainer(c, killedExitCode, null);
      else if (!b.ignoresStopSignal) this.exitContainer(c, b.stopExitCode, null);
    });
  }

  remove(id: string): Promise<void> {
    return this.call({ op: 'remove', containerId: id, image: null, name: null }, () => {
      const c = this.containersById.get(id);
      if (c === undefined) return;
      this.exitContainer(c, killedExitCode, null);
      this.containersById.delete(id);
      for (const f of c.followers) f.end();
      this.emit('destroy', c, {});
    });
  }

  inspect(id: string): Promise<ContainerInfo | undefined> {
    return this.call({ op: 'inspect', containerId: id, image: null, name: null }, () => {
      const c = this.containersById.get(id);
      return c === undefined ? undefined : copyInfo(c.info);
    });
  }

  logs(id: string, opts: LogOptions): Promise<LogReader> {
    return this.call({ op: 'logs', containerId: id, image: null, name: null }, () => {
      const c = this.mustGet(id);
      const since = opts.sinceMs;
      const written = since === null ? c.log : c.log.filter((l) => l.at >= since);
      const tail = opts.tailLines === null ? written : opts.tailLines === 0 ? [] : written.slice(-opts.tailLines);
      const following = opts.follow && c.info.state === 'running';
      const q = new LogQueue(this.logLinesMax, () => c.followers.delete(q));
      for (const l of tail) q.push({ ...l });
      // As Docker's: a follow ends when the container stops; a read, at the last line written.
      if (following) c.followers.add(q);
      else q.end();
      return q;
    });
  }

  events(labels: Labels, onEvent: (e: RuntimeEvent) => void, onError: (err: RuntimeError) => void): () => void {
    const s: Subscriber = { labels: { ...labels }, onEvent, onError, active: true };
    if (this.unavailable !== null || this.closed) {
      const message = this.unavailable ?? 'the runtime is closed';
      s.active = false;
      queueMicrotask(() => onError(new RuntimeError('unavailable', message)));
      return () => undefined;
    }
    this.subscribers.push(s);
    return () => {
      s.active = false;
      this.subscribers = this.subscribers.filter((x) => x !== s);
    };
  }

  /** Ends every event stream and refuses further calls; containers are left as they are. Idempotent. */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      for (const s of this.subscribers) s.active = false;
      this.subscribers = [];
    }
    return Promise.resolve();
  }

  // ---- internals ----

  /** Every call is asynchronous, may be held by a hang, and fails while the runtime is unavailable. */
  private async call<T>(c: RuntimeCall, f: () => T | Promise<T>): Promise<T> {
    await Promise.resolve();
    for (const h of this.hangs) {
      if (h.active && h.filter(c)) await new Promise<void>((resolve) => h.waiters.push(resolve));
    }
    if (this.closed) throw new RuntimeError('unavailable', 'the runtime is closed');
    if (this.unavailable !== null) throw new RuntimeError('unavailable', this.unavailable);
    return f();
  }

  private mustGet(id: string): MemContainer {
    const c = this.containersById.get(id);
    if (c === undefined) throw new RuntimeError('not_found', `No such container: ${id}`);
    return c;
  }

  private behaviourFor(spec: ContainerSpec): ContainerBehaviour {
    const b: ContainerBehaviour = { ...defaultBehaviour };
    for (const r of this.rules) if (r.match(spec)) Object.assign(b, r.behaviour);
    return b;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.clock.setTimer(ms, resolve));
  }

  /** A timer that belongs to the container's current run: cancelled when it exits. */
  private after(c: MemContainer, ms: number, fn: () => void): void {
    const t = this.clock.setTimer(ms, () => {
      c.timers.delete(t);
      fn();
    });
    c.timers.add(t);
  }

  private scheduleHealth(c: MemContainer, b: ContainerBehaviour): void {
    const hc = c.spec.healthCheck;
    if (hc === null || b.health === 'hold') return;
    if (b.health === 'pass') this.after(c, hc.intervalMs, () => this.setHealth(c.info.id, 'healthy'));
    else this.after(c, hc.startPeriodMs + hc.intervalMs * hc.retries, () => this.setHealth(c.info.id, 'unhealthy'));
  }

  private exitContainer(c: MemContainer, code: number, error: string | null): void {
    if (c.info.state !== 'running') return;
    for (const t of c.timers) t.cancel();
    c.timers.clear();
    Object.assign(c.info, { state: 'exited', exitCode: code, finishedAt: this.clock.wallNow(), error } satisfies Partial<ContainerInfo>);
    this.appendLog(c, 'stdout', `shoal memory runtime: container exited with code ${code}${error !== null ? ` (${error})` : ''}`);
    for (const f of c.followers) f.end();
    if (error !== null) this.emit('oom', c, {});
    this.emit('die', c, { exitCode: code });
    for (const w of c.exitWaiters.splice(0)) w();
  }

  private appendLog(c: MemContainer, stream: LogStream, text: string): void {
    const line: LogLine = { stream, at: this.clock.wallNow(), text };
    c.log.push(line);
    if (c.log.length > this.logLinesMax) c.log.splice(0, c.log.length - this.logLinesMax);
    for (const f of c.followers) f.push({ ...line });
  }

  private emit(type: RuntimeEventType, c: MemContainer, extra: { exitCode?: number; health?: HealthState }): void {
    const e: RuntimeEvent = { type, containerId: c.info.id, labels: { ...c.info.labels }, at: this.clock.wallNow(), ...extra };
    this.eventLog.push(e);
    if (this.eventLog.length > this.historyMax) this.eventLog.splice(0, this.eventLog.length - this.historyMax);
    if (this.unavailable !== null) return;
    for (const s of this.subscribers) {
      if (!matchesLabels(e.labels, s.labels)) continue;
      queueMicrotask(() => {
        if (s.active) s.onEvent({ ...e, labels: { ...e.labels } });
      });
    }
  }
}

function copyInfo(i: ContainerInfo): ContainerInfo {
  return { ...i, labels: { ...i.labels } };
}
