// Exponential backoff without jitter: deterministic, so a simulated run replays. Pure.

/** The wait after `failures` consecutive failures (1 = the first): minMs, doubled each time, at most maxMs. */
export function backoffDelayMs(failures: number, minMs: number, maxMs: number): number {
  if (failures <= 0) return 0;
  // 2 ** 40 already exceeds any sane maxMs; the cap keeps the power finite.
  return Math.min(maxMs, minMs * 2 ** Math.min(failures - 1, 40));
}
