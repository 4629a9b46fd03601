// The replicated document store (the Raft state machine). See README.md for the design.

export { DocumentStore, type DocumentStoreOptions } from './store.ts';
export {
  encodeCommand, decodeCommand, validateStamped, collectionSchema, idSchema, idPrefixSchema,
  type Command, type Stamped, type Expect, type PutOp, type DeleteOp, type Op, type Compare, type CompareTarget,
  type CompareOperator, type TxnCommand, type RetainCommand,
} from './command.ts';
export { ChangeWake, type ChangeWakeOptions } from './change-wake.ts';
export { requestFingerprint } from './fingerprint.ts';
export { CursorExpiredError, InvalidCommandError, SnapshotFormatError } from './errors.ts';
export type { Issue } from './json-value.ts';
export type {
  JsonValue, JsonObject, Doc, WatchEvent, WatchFilter, ListOptions, ListPage, CommandError, CommandErrorCode,
  OpResult, CommandResult, StoreStats,
} from './types.ts';
export * as limits from './limits.ts';
