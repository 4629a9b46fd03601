// Every bound the document store enforces, in one place. Units come last in the names.
// Commands that break a limit are refused with a bad_request result when applied (and by
// encodeCommand before they are proposed), so a limit never changes what a node stores.

/** Collection names: lower-case, start with a letter or digit, at most 63 characters. */
export const collectionNamePattern = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
/**
 * Document ids: 1..256 characters (Unicode code points, as zod counts them), no '/' (the id is
 * one URL path segment), no control character (C0, DEL, C1) and no lone surrogate: every id that
 * can be written can be read and deleted through the URL. List and watch prefixes follow the
 * same rule (and may be empty).
 */
export const idLengthMax = 256;
/** A document serialized as JSON (UTF-8) may not exceed this. */
export const docBytesMax = 1024 * 1024;
/** Nesting depth of a document (objects and arrays); keeps validation and encoding off deep recursion. */
export const docDepthMax = 64;
/** A whole encoded command (the entry data). A txn of many documents must still fit. */
export const commandBytesMax = 4 * 1024 * 1024;
/** Compares in one txn, and ops in each of its branches (etcd's default for both is 128). */
export const txnComparesMax = 128;
export const txnOpsMax = 128;
/** Ids a retain command may keep. */
export const retainIdsMax = 100_000;
/** Principal names and idempotency keys: 1..256 characters. */
export const principalLengthMax = 256;
export const idempotencyKeyLengthMax = 256;

/** list(): page size when none is given, and the largest page (bigger limits are clamped). */
export const listLimitDefault = 100;
export const listLimitMax = 1000;

/** Defaults for the DocumentStore options. */
export const eventsRetainedMaxDefault = 10_000;
export const eventsRetainedBytesMaxDefault = 64 * 1024 * 1024;
export const idempotencyWindowMsDefault = 24 * 60 * 60 * 1000;
export const idempotencyRecordsMaxDefault = 10_000;
export const idempotencyBytesMaxDefault = 64 * 1024 * 1024;
/** Audit records kept at most (oldest trimmed first), and for how long (log time): default 10,000 and 7 days. */
export const auditRetainedMaxDefault = 10_000;
export const auditRetainedMsDefault = 7 * 24 * 60 * 60 * 1000;
/** Records trimmed by age in one apply at most, so one entry after a quiet week stays small. */
export const auditTrimPerApplyMax = 64;
