// Stands in for the Docker runtime until it is wired (src/executor/docker-runtime.ts): every call
// says the runtime is unavailable, so the node says so in `shoal node ls` and gets no placements.

import { RuntimeError, type ContainerInfo, type Runtime } from './runtime.ts';

const unavailable = (): Promise<never> => Promise.reject(new RuntimeError('unavailable', 'the Docker runtime is not part of this build yet; use runtime: {kind: memory} or none'));

export class DockerRuntimePlaceholder implements Runtime {
  readonly kind = 'docker';
  ping = unavailable;
  list = unavailable as () => Promise<ContainerInfo[]>;
  ensureImage = unavailable;
  create = unavailable as () => Promise<string>;
  start = unavailable;
  stop = unavailable;
  kill = unavailable;
  remove = unavailable;
  inspect = unavailable as () => Promise<ContainerInfo | undefined>;
  events(_labels: Record<string, string>, _onEvent: unknown, onError: (err: RuntimeError) => void): () => void {
    queueMicrotask(() => onError(new RuntimeError('unavailable', 'the Docker runtime is not part of this build yet')));
    return () => {};
  }
  async close(): Promise<void> {}
}
