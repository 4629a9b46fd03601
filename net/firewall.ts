// Applies a rendered table on this node and knows what is in force.
//
// apply(): takes what the kernel holds now (the `applied` rule's comment: term and revision;
// the `permits` and `published` sets), as the loop's pass read it or read here, replaces the table with `nft -f -` (one transaction:
// the whole new table or, on any error, the old one untouched), makes sure Docker's FORWARD
// chain lets shoal's accepted packets through, and then deletes the conntrack entries of every
// permission the new table no longer has, so connections it allowed end too, not only new ones.
// When a step after `nft -f` fails, the new table is in force and a retry reading it would find
// nothing removed; so the apply throws a FirewallApplyUnfinishedError carrying the permissions
// whose connections it had not ended, and the loop hands them to the next apply (`owed`), which
// ends them unless its table permits them again (applied-table.ts, "what is owed").
//
// Why conntrack -D rather than nft's `ct` expressions: a rule cannot end a tracked connection,
// only drop its packets; with our `ct state established accept` first, the entry must go. Once
// deleted, the next packet of that flow is looked at as new, meets no permit, and is dropped.
// The tuples come from the kernel's own set (read back as JSON), so a restart of shoal, which
// forgets everything, still closes what the table it finds had allowed.
//
// Docker: its FORWARD policy is DROP, and an accept in our table does not override a drop in
// another (every base chain on the hook must accept). Docker evaluates DOCKER-USER first, so
// shoal keeps one rule there: accept packets carrying the mark bit that every accept of our
// forward chain sets. Our table runs first (priority filter - 10), decides, and Docker's chain
// follows that decision for shoal's traffic only (net/docker-user-rule.ts, shared with the mesh).

import { ApplyUnfinishedError } from './applied-table.ts';
import { dockerUserRule, ensureDockerUserRule, removeDockerUserRule } from './docker-user-rule.ts';
import { runChecked, type CommandRunner } from './firewall-command.ts';
import { deleteArgs, flowsToEnd, parseFlows } from './conntrack.ts';
import { addressPorts, deleteTable, listTable, protocolOf, readTableListing } from './nft-table.ts';
import { removedPermits, removedPublished, type Permit, type Published } from './firewall-permits.ts';
import { parseAppliedComment, tableFamily, tableName, type RenderedFirewall } from './firewall-render.ts';

export interface InForce {
  nodeId: string;
  term: number;
  revision: number;
  permits: Permit[];
  published: Published[];
}

export interface ApplyReport {
  /** What was in force before (null: no table). */
  before: { term: number; revision: number } | null;
  /** Permissions removed (with those an unfinished apply owed and this table does not permit again), whose connections were ended. */
  revoked: number;
  /** Whether the DOCKER-USER rule is in place (false: no Docker chain on this host). */
  docker: boolean;
}

/** Permissions and published ports whose connections an apply ends, or an unfinished one still owes. */
export interface Revoked {
  permits: Permit[];
  published: Published[];
}

/** The new table is in force; a step after it failed, and `owed` is what it had not finished revoking (null: nothing). */
export class FirewallApplyUnfinishedError extends ApplyUnfinishedError<Revoked> {}

/**
 * What an apply of `rendered` revokes: what the table in force `before` permitted and `rendered`
 * does not, and what an earlier apply `owed` that `rendered` does not permit again; each once.
 */
export function revokedBy(rendered: Pick<RenderedFirewall, 'permits' | 'published'>, before: Pick<InForce, 'permits' | 'published'> | null, owed: Revoked | null): Revoked {
  const permits = removedPermits(before?.permits ?? [], rendered.permits);
  const published = removedPublished(before?.published ?? [], rendered.published);
  return {
    permits: [...permits, ...removedPermits(owed?.permits ?? [], [...rendered.permits, ...permits])],
    published: [...published, ...removedPublished(owed?.published ?? [], [...rendered.published, ...published])],
  };
}

/** Connections ended after one apply at most; the rest are logged and end when they close. */
export const conntrackDeletesMax = 4096;

export const dockerRuleComment = 'shoal-firewall';
const dockerRule = dockerUserRule(dockerRuleComment);

/** Reads `nft -j list table inet shoal` into what is in force; null when there is no such table. */
export function parseListing(json: string): InForce | null {
  const { appliedComment, sets } = readTableListing(json);
  const applied = appliedComment === null ? null : parseAppliedComment(appliedComment);
  if (applied === null) return null;
  const permits: Permit[] = [];
  for (const [from, to, proto, port] of sets.get('permits') ?? []) {
    const protocol = protocolOf(proto);
    if (protocol !== null) permits.push({ from: String(from), to: String(to), protocol, port: Number(port) });
  }
  const published: Published[] = addressPorts(sets.get('published'));
  return { ...applied, permits, published };
}

export class Firewall {
  constructor(private readonly run: CommandRunner, private readonly log: (line: string) => void = () => undefined) {}

  /** What the kernel holds now, or null when shoal's table is not there. */
  async inForce(): Promise<InForce | null> {
    const json = await listTable(this.run, tableFamily, tableName);
    return json === null ? null : parseListing(json);
  }

  /**
   * `before`: the table in force as the caller just read it (read again when not given). `owed`:
   * what an earlier, unfinished apply had not revoked (its FirewallApplyUnfinishedError's).
   * Throws a FirewallApplyUnfinishedError when the new table is in force but a later step failed.
   */
  async apply(rendered: RenderedFirewall, before?: InForce | null, owed: Revoked | null = null): Promise<ApplyReport> {
    if (before === undefined) before = await this.inForce();
    await runChecked(this.run, 'nft', ['-f', '-'], rendered.text);
    const revoked = revokedBy(rendered, before, owed);
    const count = revoked.permits.length + revoked.published.length;
    try {
      const docker = await this.ensureDockerRule();
      await this.endConnections(revoked.permits, revoked.published);
      return { before: before === null ? null : { term: before.term, revision: before.revision }, revoked: count, docker };
    } catch (err) {
      throw new FirewallApplyUnfinishedError(count === 0 ? null : revoked, err);
    }
  }

  /** Removes shoal's table and its DOCKER-USER rule (firewall switched off). */
  async remove(): Promise<void> {
    await deleteTable(this.run, tableFamily, tableName);
    await removeDockerUserRule(this.run, dockerRule);
  }

  /** Makes sure DOCKER-USER lets shoal's accepted packets through; false when the host has no such chain. */
  ensureDockerRule(): Promise<boolean> {
    return ensureDockerUserRule(this.run, dockerRule);
  }

  /**
   * Ends the open flows the removed permissions allowed: one listing of the table, matched here,
   * then one exact delete per flow found (net/conntrack.ts says why not a filtered delete per
   * permission), all in one `conntrack -R -`.
   */
  private async endConnections(permits: readonly Permit[], published: readonly Published[]): Promise<void> {
    if (permits.length + published.length === 0) return;
    const listed = await this.run('conntrack', ['-L']);
    if (listed.code !== 0) await runChecked(this.run, 'conntrack', ['-L']);
    const flows = flowsToEnd(parseFlows(listed.stdout), permits, published);
    if (flows.length > conntrackDeletesMax) this.log(`${flows.length} connections lost their permission; the first ${conntrackDeletesMax} are ended, the others stay until they close`);
    const batch = flows.slice(0, conntrackDeletesMax).map(deleteArgs);
    if (batch.length === 0) return;
    const batched = await this.run('conntrack', ['-R', '-'], `${batch.map((args) => args.join(' ')).join('\n')}\n`);
    if (batched.code === 0) return;
    // Refused as a batch: one by one, so an error names the deletion that failed.
    for (const args of batch) {
      const r = await this.run('conntrack', args);
      // Exit 1 with "0 flow entries have been deleted": the flow closed meanwhile, not a failure.
      if (r.code !== 0 && !/flow entries have been deleted/.test(r.stderr)) await runChecked(this.run, 'conntrack', args);
    }
  }
}
