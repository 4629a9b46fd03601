export { RawNode } from './raw-node.ts';
export { MemoryStorage, bootstrapStorage, CompactedError, SnapshotUnavailableError, emptyConfState, emptySnapshot } from './storage.ts';
export type { LogStorage, InitialState } from './storage.ts';
export { SeededPrng } from './prng.ts';
export { AssertionError } from '../base/assert.ts';
export * from './types.ts';
