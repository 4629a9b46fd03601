// Every bound the spec vocabulary puts on its input. A spec is data a person or a generator
// wrote; without a bound, `replicas: 1e9` is a billion task documents and an env of a million
// entries is a container that cannot be created. The numbers are generous for a homelab and
// small enough that a mistake is refused rather than executed.

export const specLimits = {
  /** Documents in one apply (a file or a request body). */
  documentsMax: 1000,
  /** Problems reported for one refused input; the rest are counted, not listed. */
  problemsMax: 200,
  /** Tasks of one replicated service. */
  replicasMax: 10_000,
  /** Items of each list in a service (ports, mounts, devices, constraints, capabilities). */
  listItemsMax: 128,
  /** Entries of `env`, and items of `command` and `args`. */
  envEntriesMax: 1024,
  argsItemsMax: 1024,
  /** Characters of a string field (an env value, an argument, a path). */
  stringCharsMax: 32_768,
  /** Characters of an image reference. */
  imageCharsMax: 512,
  /** Docker refuses a container memory limit under 6 MiB. */
  memoryLimitBytesMin: 6 * 1024 * 1024,
  /** The shortest health-check interval and timeout; a check every few milliseconds is a load, not a check. */
  healthCheckIntervalMsMin: 100,
  /** Durations in a spec (grace periods, delays, intervals) are at most a day. */
  durationMsMax: 24 * 3_600_000,
  /** Health-check retries and restart attempts. */
  retriesMax: 1000,
  /** Log files kept per container, and the smallest log file size. */
  logFilesMax: 100,
  logFileBytesMin: 1024,
  /** A replicated volume (issue 41): copies besides the live one (a homelab has at most a few nodes). */
  replicateCopiesMax: 16,
  /** Its interval: a snapshot every second at the most, and at least one a day. */
  replicateEveryMsMin: 1000,
  replicateEveryMsMax: 24 * 3_600_000,
  /** Its size: mkfs.btrfs refuses a filesystem under about 110 MiB (single data and metadata). */
  replicateSizeBytesMin: 128 * 1024 * 1024,
  /** Its maxBandwidth, bytes per second: at least 64 KiB/s (slower, an interval's increment rarely finishes). */
  replicateBandwidthMin: 64 * 1024,
  /** Its hooks' timeout: a second at the least, 10 minutes at the most (a pass waits for them). */
  replicateHookTimeoutMsMin: 1000,
  replicateHookTimeoutMsMax: 600_000,
} as const;
