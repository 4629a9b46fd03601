// What a per-node table loop (the firewall's, net/firewall-loop.ts; the routing mesh's,
// net/ingress-loop.ts) applied last, and whether a pass needs to apply anything at all
// (docs/network.md, "quiet passes").
//
// Both loops render a whole nftables table from the committed store on every change they watch,
// and most changes (a task report written again, a node's address, another service's task) leave
// the table as it was but for its stamp, the term and revision it was rendered from. Applying it
// anyway forks `nft -f`, two `iptables` and maybe `conntrack`, seconds each on a loaded host, and
// queues the pass that does matter behind it. So a pass applies nothing when the new rendering,
// stamp aside, is the text this loop applied last AND that table is still in force: the kernel's
// table carries its stamp and its sets read back equal (someone may have flushed one). The stamp
// in force then stays the last applied one, which fencing is fine with: a newer revision that
// renders the same table replaces nothing.
//
// A pass that applies nothing does not check the DOCKER-USER rule either (an apply does), except
// every dockerRuleCheckMs, so a rule someone deleted comes back within that time.
//
// The caller reads the table in force once per pass and hands the same reading to decide() and
// to its applier.
//
// What is owed: an apply ends the open connections of what its new table removed, computed from
// the table in force before it. When a step after `nft -f` fails (iptables, conntrack), the new
// table is in force and the next pass, reading it, would see nothing removed: the connections a
// revoked permission or a removed backend allowed would stay open for good. So the applier throws
// an ApplyUnfinishedError carrying what it had not finished ending, which is kept here and handed
// to the next apply (applyOwing); that apply ends it along with what its pass removes, except what
// its new rendering holds again. No pass is quiet while something is owed; an apply that finishes
// clears it (recordApplied).

/** While passes apply nothing, the DOCKER-USER rule is still checked this often (an apply checks it each time). */
export const dockerRuleCheckMs = 30_000;

/** A table as compared here: its rendering without the stamp, the stamp, and its sets as one key (setsKey). */
export interface TableState {
  body: string;
  term: number;
  revision: number;
  sets: string;
}

/** The table in force as the pass read it: its stamp and its sets' key. */
export type TableInForce = Omit<TableState, 'body'>;

export type TableDecision = 'apply' | 'unchanged';

/** One key for a table's sets, whatever order or duplicates the elements come in (the kernel lists a set in its own order). */
export function setsKey(...sets: readonly (readonly string[])[]): string {
  return sets.map((s) => [...new Set(s)].sort().join(' ')).join(' | ');
}

/** A rendering without its stamp: every occurrence of the stamp's text (the table's comment and the `applied` rule's) removed. */
export function withoutStamp(text: string, stamp: string): string {
  return text.replaceAll(stamp, '');
}

/**
 * An apply whose new table is in force but which did not finish (a step after `nft -f` failed:
 * iptables, conntrack): `owed` is what that table removed and the apply had not ended (null:
 * nothing); the message is the cause's. Each applier fixes `Owed` in a subclass.
 */
export class ApplyUnfinishedError<Owed> extends Error {
  constructor(readonly owed: Owed | null, cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'ApplyUnfinishedError';
  }
}

/** `Owed`: what an apply removed and did not finish ending (the firewall's permissions, the mesh's backends). */
export class AppliedTable<Owed> {
  /** What this loop applied last (null: nothing yet in this process, so the first pass always applies). */
  private last: TableState | null = null;
  private dockerCheckedAt = -Infinity;
  /** Removed by an apply that failed after `nft -f`, not yet ended (null: nothing owed). Never quiet while set. */
  private owedNow: Owed | null = null;

  /** `now`: monotonic ms (tests inject one). */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** The revision of the table this loop applied last (null: none yet). */
  get revision(): number | null {
    return this.last?.revision ?? null;
  }

  /** What an earlier apply left to end (null: nothing). */
  get owed(): Owed | null {
    return this.owedNow;
  }

  /** 'unchanged': nothing is owed, `body` is the text applied last and that table is in force (its stamp, its sets); otherwise 'apply'. */
  decide(body: string, inForce: TableInForce | null): TableDecision {
    const last = this.last;
    if (last === null || inForce === null || this.owedNow !== null) return 'apply';
    const inPlace = inForce.term === last.term && inForce.revision === last.revision && inForce.sets === last.sets;
    return inPlace && body === last.body ? 'unchanged' : 'apply';
  }

  /** Records a table applied, all it removed ended (nothing owed any more); `dockerChecked`: that apply checked the DOCKER-USER rule. */
  recordApplied(table: TableState, dockerChecked: boolean): void {
    this.last = table;
    this.owedNow = null;
    if (dockerChecked) this.dockerCheckedAt = this.now();
  }

  /**
   * Runs an apply, handing it what is owed; when it throws an `unfinished` (the applier's
   * ApplyUnfinishedError), what that carries is owed from now on (it includes what was owed
   * before, less what the new table has again). Any other failure leaves what is owed as it was.
   */
  async applyOwing<R>(apply: (owed: Owed | null) => Promise<R>, unfinished: abstract new (...args: never[]) => ApplyUnfinishedError<Owed>): Promise<R> {
    try {
      return await apply(this.owedNow);
    } catch (err) {
      if (err instanceof unfinished) this.owedNow = err.owed;
      throw err;
    }
  }

  /** On a pass that applies nothing: runs `check` when the last check is dockerRuleCheckMs old or more; returns whether it ran. */
  async maybeCheckDockerRule(check: () => Promise<unknown>): Promise<boolean> {
    if (this.now() - this.dockerCheckedAt < dockerRuleCheckMs) return false;
    await check();
    this.dockerCheckedAt = this.now();
    return true;
  }
}
