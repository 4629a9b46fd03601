// The jobs' clock rule (docs/control-plane.md, Jobs, "Clocks"): a leader fires scheduled runs
// from its own wall clock, and a Raspberry Pi has no real-time clock (it may boot with
// yesterday's time and set it when NTP answers). So a leader whose clock is known not to be
// synchronized, or is more than `skewMaxMs` from the members' median, fires nothing and says why.
//
// The median is of every member whose clock is known, this node included (its own offset is 0):
// one member with a wrong clock cannot hold a leader whose clock agrees with the rest, and with
// two members the median lies half-way, so the rule holds only when the two are more than twice
// the limit apart (nothing tells which of two clocks is right). Members whose clock is unknown (a
// peer of the previous release, a link down for long) are left out; with no other member's clock
// known, only the synchronization status can hold. An unknown status (no systemd, timedatectl
// failing) never holds: the rule would otherwise stop every job on hosts it cannot read.

/** Default: how far the leader's clock may be from the members' median. */
export const jobClockSkewMaxMsDefault = 30_000;
/** An offset measured longer ago than this is of a link gone: the member's clock counts as unknown. */
export const clockOffsetFreshMs = 60_000;

export interface ClockSanityInput {
  /** This node (the leader). */
  self: string;
  /** Each other member's wall clock minus this node's, ms; members whose clock is unknown are absent. */
  offsets: ReadonlyMap<string, number>;
  /** Whether this node's clock is synchronized (NTP); undefined: unknown. */
  synchronized: boolean | undefined;
  skewMaxMs: number;
}

export interface ClockSanity {
  /** Why no job may fire, for an operator to act on; null: jobs may fire. */
  hold: string | null;
  /** This node's clock minus the members' median, ms; null when no other member's clock is known. */
  skewMs: number | null;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function seconds(ms: number): string {
  const s = Math.abs(ms) / 1000;
  return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
}

function signedSeconds(ms: number): string {
  return `${ms < 0 ? '-' : '+'}${seconds(ms)}`;
}

const afterwards = 'fix its time (NTP: `timedatectl`, chrony or systemd-timesyncd) or hand leadership over (`shoal cluster transfer-leader`); no scheduled job fires meanwhile';

/** The rule (pure). */
export function assessClock(input: ClockSanityInput): ClockSanity {
  const others = [...input.offsets].filter(([id, ms]) => id !== input.self && Number.isFinite(ms));
  const skewMs = others.length === 0 ? null : 0 - median([0, ...others.map(([, ms]) => ms)]);
  if (input.synchronized === false) {
    return { hold: `this leader's clock is not synchronized (the system says NTP has not set it): ${afterwards}`, skewMs };
  }
  if (skewMs !== null && Math.abs(skewMs) > input.skewMaxMs) {
    const list = others.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([id, ms]) => `${id} ${signedSeconds(ms)}`).join(', ');
    const way = skewMs > 0 ? 'ahead of' : 'behind';
    return {
      hold: `this leader's clock is ${seconds(skewMs)} ${way} the members' median, more than the ${seconds(input.skewMaxMs)} allowed `
        + `(the members' clocks against it: ${list}): ${afterwards}`,
      skewMs,
    };
  }
  return { hold: null, skewMs };
}

/** The members' offsets as the transport measured them (PeerContact), fresh ones only. */
export function offsetsOf(
  self: string,
  members: Iterable<string>,
  contact: (id: string) => { clockOffsetMs?: number; clockSampledAgoMs?: number } | undefined,
  freshMs = clockOffsetFreshMs,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const id of members) {
    if (id === self) continue;
    const c = contact(id);
    if (c?.clockOffsetMs === undefined || c.clockSampledAgoMs === undefined || c.clockSampledAgoMs > freshMs) continue;
    out.set(id, c.clockOffsetMs);
  }
  return out;
}
