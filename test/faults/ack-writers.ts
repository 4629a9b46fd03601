// Writers of an "ack log": documents acks/<runId>-ack-<writer>-<seq>, each created once
// (If-None-Match: *) and never overwritten, so after the cluster heals every acknowledged one
// must be on every node. The registers cannot show that on their own: a later write overwrites
// an earlier one, so a lost acknowledged register write may be invisible in the final state.

import type { Target } from './register-clients.ts';
import { call, sleep } from './http.ts';

export interface AckWritersOptions {
  writers: number;
  collection: string;
  runId: string;
  targets: () => readonly Target[];
  requestTimeoutMs: number;
  /** Pause between a writer's writes. */
  intervalMs: number;
}

export class AckWriters {
  /** Ids of acknowledged documents. */
  readonly acked = new Set<string>();
  attempted = 0;
  private running = false;
  private loops: Promise<void>[] = [];

  constructor(private readonly opts: AckWritersOptions) {}

  start(): void {
    this.running = true;
    this.loops = Array.from({ length: this.opts.writers }, (_, w) => this.writer(w));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** The acknowledged ids missing from `present`. */
  missingFrom(present: ReadonlySet<string>): string[] {
    return [...this.acked].filter((id) => !present.has(id)).sort();
  }

  private async writer(w: number): Promise<void> {
    let target = w;
    let errorsInARow = 0;
    for (let seq = 0; this.running; seq++) {
      const targets = this.opts.targets();
      const node = targets[target % Math.max(1, targets.length)];
      if (node === undefined) {
        await sleep(50);
        continue;
      }
      const id = `${this.opts.runId}-ack-${w}-${seq}`;
      this.attempted++;
      const r = await call(node.apiAddress, `/v1/docs/${this.opts.collection}/${id}`, {
        method: 'PUT', body: { writer: w, seq }, timeoutMs: this.opts.requestTimeoutMs,
        headers: { 'if-none-match': '*', 'idempotency-key': id },
      });
      if (r.kind === 'answer' && r.status === 200) {
        this.acked.add(id);
        errorsInARow = 0;
      } else {
        target++;
        errorsInARow++;
      }
      await sleep(this.opts.intervalMs + Math.min(1000, errorsInARow === 0 ? 0 : 50 * 2 ** (errorsInARow - 1)));
    }
  }
}

/** Every id in `collection` on the node, read from its local store (after /readyz?sync). */
export async function listIds(apiAddress: string, collection: string): Promise<Set<string>> {
  const ids = new Set<string>();
  let after: string | null = null;
  for (let page = 0; page < 100_000; page++) {
    const q: string = `/v1/docs/${collection}?consistency=stale&limit=1000${after === null ? '' : `&after=${encodeURIComponent(after)}`}`;
    const r = await call(apiAddress, q, { timeoutMs: 10_000 });
    if (r.kind !== 'answer' || r.status !== 200) {
      throw new Error(`listing ${collection} on ${apiAddress} failed: ${r.kind === 'answer' ? `${r.status} ${JSON.stringify(r.body)}` : r.error}`);
    }
    const body = r.body as { items: { id: string }[]; next: string | null };
    for (const item of body.items) ids.add(item.id);
    if (body.next === null) return ids;
    after = body.next;
  }
  throw new Error(`listing ${collection} on ${apiAddress} did not end`);
}
