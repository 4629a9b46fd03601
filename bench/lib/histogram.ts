// A latency histogram in the manner of HdrHistogram: exact below 256 µs, then 128 linear
// sub-buckets per power of two (relative error under 0.8 %), so memory stays fixed however long
// a run lasts and recording costs a few integer operations.

const exactBelowMicros = 256;
const subBucketsPerOctave = 128;
/** Octaves above 256 µs: up to 2^31 µs (about 35 minutes) is plenty for one request. */
const octavesMax = 24;
const bucketCount = exactBelowMicros + octavesMax * subBucketsPerOctave;

function bucketOf(micros: number): number {
  const v = Math.max(0, Math.min(Math.round(micros), 2 ** 31 - 1));
  if (v < exactBelowMicros) return v;
  // v >> shift lands in [128, 255]: the sub-bucket within its octave.
  const shift = 31 - Math.clz32(v) - 7;
  return exactBelowMicros + (shift - 1) * subBucketsPerOctave + ((v >>> shift) - subBucketsPerOctave);
}

/** The middle of a bucket's range, in µs. */
function valueOf(bucket: number): number {
  if (bucket < exactBelowMicros) return bucket;
  const rel = bucket - exactBelowMicros;
  const shift = Math.floor(rel / subBucketsPerOctave) + 1;
  const sub = (rel % subBucketsPerOctave) + subBucketsPerOctave;
  return sub * 2 ** shift + 2 ** (shift - 1);
}

export class LatencyHistogram {
  private readonly counts = new Float64Array(bucketCount);
  private total = 0;
  private maxMicros = 0;
  private sumMicros = 0;

  recordMicros(micros: number): void {
    const i = bucketOf(micros);
    this.counts[i] = (this.counts[i] ?? 0) + 1;
    this.total++;
    this.sumMicros += micros;
    if (micros > this.maxMicros) this.maxMicros = micros;
  }

  /** Adds every recording of `other` to this histogram. */
  merge(other: LatencyHistogram): void {
    for (let i = 0; i < bucketCount; i++) this.counts[i] = (this.counts[i] ?? 0) + (other.counts[i] ?? 0);
    this.total += other.total;
    this.sumMicros += other.sumMicros;
    if (other.maxMicros > this.maxMicros) this.maxMicros = other.maxMicros;
  }

  get count(): number {
    return this.total;
  }

  /** The latency at quantile q (0..1), in milliseconds; NaN when empty. */
  quantileMs(q: number): number {
    if (this.total === 0) return Number.NaN;
    const rank = Math.max(1, Math.ceil(q * this.total));
    let seen = 0;
    for (let i = 0; i < bucketCount; i++) {
      seen += this.counts[i] ?? 0;
      if (seen >= rank) return Math.min(valueOf(i), this.maxMicros) / 1000;
    }
    return this.maxMicros / 1000;
  }

  get meanMs(): number {
    return this.total === 0 ? Number.NaN : this.sumMicros / this.total / 1000;
  }

  get maxMs(): number {
    return this.maxMicros / 1000;
  }
}
