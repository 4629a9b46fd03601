// A small seeded PRNG (sfc32 seeded through splitmix32). Deterministic across platforms, so a
// seed replays a simulation exactly. Not for cryptography.

import type { Prng } from './types.ts';

export class SeededPrng implements Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    let s = seed >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x21f0aaad);
      z = Math.imul(z ^ (z >>> 15), 0x735a2d97);
      return (z ^ (z >>> 15)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    for (let i = 0; i < 12; i++) this.nextUint32();
  }

  /** A uniformly distributed 32-bit unsigned integer. */
  nextUint32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** An integer in [0, n). */
  nextInt(n: number): number {
    if (!(n > 0)) throw new RangeError(`nextInt(${n}): n must be positive`);
    return Math.floor((this.nextUint32() / 4294967296) * n);
  }

  /** A float in [0, 1). */
  nextFloat(): number {
    return this.nextUint32() / 4294967296;
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.nextFloat() < p;
  }

  /** Shuffles `items` in place (Fisher-Yates, one draw per position from the end) and returns it. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.nextInt(i + 1);
      const t = items[i] as T;
      items[i] = items[j] as T;
      items[j] = t;
    }
    return items;
  }

  /** A PRNG whose sequence is independent of this one's future draws. */
  fork(): SeededPrng {
    return new SeededPrng(this.nextUint32());
  }
}
