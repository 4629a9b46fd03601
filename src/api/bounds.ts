// Counted slots for long-lived answers (watch streams, snapshot downloads): a slot per answer,
// a bound per node and optionally per client address, and a count of refusals per limit for
// /metrics. A refusal is a catalogued error the client can act on: 503 overloaded (this node is
// full; another node may not be) or 429 too_many_requests (this client holds its share).

import { ShoalError } from '../errors.ts';

/** Refusals per limit name (`watchStreamsMax`, ...), for shoal_api_refused_total{limit}. */
export class Refusals {
  private readonly counts = new Map<string, number>();

  count(limit: string): void {
    this.counts.set(limit, (this.counts.get(limit) ?? 0) + 1);
  }

  entries(): [string, number][] {
    return [...this.counts.entries()];
  }
}

export interface SlotLimits {
  /** Name of the per-node limit, as in ApiLimits and docs/api.md. */
  name: string;
  max: number;
  /** Name and value of the per-client-address limit, if there is one. */
  perClient?: { name: string; max: number };
}

export class Slots {
  private total = 0;
  private readonly byClient = new Map<string, number>();

  constructor(readonly what: string, private readonly limits: SlotLimits, private readonly refusals: Refusals) {}

  get inUse(): number {
    return this.total;
  }

  /** Takes a slot for `client` or throws; the returned release may be called any number of times. */
  acquire(client: string): () => void {
    const { name, max, perClient } = this.limits;
    const mine = this.byClient.get(client) ?? 0;
    if (perClient !== undefined && mine >= perClient.max) {
      this.refusals.count(perClient.name);
      throw new ShoalError('too_many_requests', `this client address (${client}) already holds ${mine} ${this.what}, the most one client may (${perClient.name} ${perClient.max}); close one or retry later`, { limit: perClient.name, max: perClient.max });
    }
    if (this.total >= max) {
      this.refusals.count(name);
      throw new ShoalError('overloaded', `this node already serves ${this.total} ${this.what}, its limit (${name} ${max}); retry later or use another node`, { limit: name, max });
    }
    this.total++;
    this.byClient.set(client, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.byClient.get(client) ?? 1) - 1;
      if (left === 0) this.byClient.delete(client);
      else this.byClient.set(client, left);
    };
  }
}
