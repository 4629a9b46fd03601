export { DiskStorage } from './disk-storage.ts';
export type { DiskStorageOptions, SaveRequest, SyncSample } from './disk-storage.ts';
export { StorageCorruptionError, StorageFormatError } from './errors.ts';
export { storagePaths } from './paths.ts';
export type { StoragePaths } from './paths.ts';
