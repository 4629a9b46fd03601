// The port for a linearizable read: wait until this node's store holds everything committed
// before the call (ReadIndex), then read the local store.

export interface ReadBarrier {
  /** Resolves with the read index once this node has applied up to it. */
  readBarrier(timeoutMs?: number): Promise<number>;
}
