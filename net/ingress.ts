// Applies the routing mesh's table on this node and knows what is in force (as net/firewall.ts
// does for the firewall's table).
//
// apply(): reads the table in force (its `applied` comment: term and revision; its `backends`
// set), replaces the table with `nft -f -` in one transaction (the whole new table or, on any
// error, the old one untouched), makes sure Docker's DOCKER-USER chain lets the mesh's forwarded
// packets through (the same mark rule the firewall keeps, under its own comment), and then
// deletes the conntrack entries of every backend the new table no longer has, UDP included: a
// removed backend's flows are matched on their reply side (the task's address and port, after
// the DNAT), so a client's next packet is looked at as new and DNATed to a live task, instead of
// going to a dead one until the entry times out. One filtered `conntrack -D` per removed backend:
// every delete is a dump of the kernel's whole table, and a dead task's flows (its open
// connections and the unanswered SYNs sent to it since it died) run to hundreds, which deleted
// one by one took 12 s on a busy two-core machine (bench/RESULTS.md, "a task's node dies"),
// while the loop applied nothing else.
//
// When a step after `nft -f` fails, the new table is in force and a retry reading it would find
// no backend removed; so the apply throws an IngressApplyUnfinishedError carrying the removed
// backends whose flows it had not deleted, and the loop hands them to the next apply (`owed`),
// which deletes them unless its table has that backend again (applied-table.ts, "what is owed").

import { ApplyUnfinishedError } from './applied-table.ts';
import { runChecked, type CommandRunner } from './firewall-command.ts';
import { dockerUserRule, ensureDockerUserRule, removeDockerUserRule } from './docker-user-rule.ts';
import { addressPorts, deleteTable, listTable, readTableListing } from './nft-table.ts';
import { ingressTableFamily, ingressTableName, parseIngressAppliedComment, type IngressBackend, type RenderedIngress } from './ingress-render.ts';

export interface IngressInForce {
  nodeId: string;
  term: number;
  revision: number;
  backends: IngressBackend[];
}

export interface IngressApplyReport {
  before: { term: number; revision: number } | null;
  /** Backends removed by this apply (with those an unfinished apply owed and this table does not have again). */
  removed: IngressBackend[];
  /** Flows of removed backends deleted from conntrack. */
  flowsEnded: number;
  /** Whether the DOCKER-USER rule is in place (false: no Docker chain on this host). */
  docker: boolean;
}

/** The new table is in force; a step after it failed, and `owed` is the removed backends whose flows it had not deleted (null: none). */
export class IngressApplyUnfinishedError extends ApplyUnfinishedError<IngressBackend[]> {}

export const dockerIngressRuleComment = 'shoal-ingress';
const dockerRule = dockerUserRule(dockerIngressRuleComment);

/** Reads `nft -j list table ip shoal-ingress` into what is in force; null when it is not shoal's (no applied comment). */
export function parseIngressListing(json: string): IngressInForce | null {
  const { appliedComment, sets } = readTableListing(json);
  const applied = appliedComment === null ? null : parseIngressAppliedComment(appliedComment);
  if (applied === null) return null;
  const backends: IngressBackend[] = addressPorts(sets.get('backends'));
  return { ...applied, backends };
}

const backendKey = (b: IngressBackend): string => `${b.address} ${b.protocol} ${b.port}`;

export function removedBackends(before: readonly IngressBackend[], after: readonly IngressBackend[]): IngressBackend[] {
  const kept = new Set(after.map(backendKey));
  return before.filter((b) => !kept.has(backendKey(b)));
}

/** What an apply of a table with `after` removes: what `before` had, and what an earlier apply `owed`, that `after` has not; each once. */
export function removedWithOwed(before: readonly IngressBackend[], after: readonly IngressBackend[], owed: readonly IngressBackend[] | null): IngressBackend[] {
  const removed = removedBackends(before, after);
  return [...removed, ...removedBackends(owed ?? [], [...after, ...removed])];
}

/** `conntrack` arguments that delete every flow DNATed to this backend (its reply side: the task's address and port). */
export function backendDeleteArgs(b: IngressBackend): string[] {
  return ['-D', '-p', b.protocol, '--reply-src', b.address, '--reply-port-src', String(b.port)];
}

export class Ingress {
  constructor(private readonly run: CommandRunner, private readonly log: (line: string) => void = () => undefined) {}

  async inForce(): Promise<IngressInForce | null> {
    const json = await listTable(this.run, ingressTableFamily, ingressTableName);
    return json === null ? null : parseIngressListing(json);
  }

  /**
   * `before`: the table in force as the caller just read it (read again when not given). `owed`:
   * the backends an earlier, unfinished apply had not ended (its IngressApplyUnfinishedError's).
   * Throws an IngressApplyUnfinishedError when the new table is in force but a later step failed.
   */
  async apply(rendered: RenderedIngress, before?: IngressInForce | null, owed: readonly IngressBackend[] | null = null): Promise<IngressApplyReport> {
    if (before === undefined) before = await this.inForce();
    await runChecked(this.run, 'nft', ['-f', '-'], rendered.text);
    const removed = removedWithOwed(before?.backends ?? [], rendered.backends, owed);
    let docker: boolean;
    try {
      docker = rendered.backends.length > 0 ? await this.ensureDockerRule() : false;
    } catch (err) {
      throw new IngressApplyUnfinishedError(removed.length === 0 ? null : removed, err);
    }
    const flowsEnded = await this.endFlows(removed);
    return { before: before === null ? null : { term: before.term, revision: before.revision }, removed, flowsEnded, docker };
  }

  /** Removes the mesh's table and its DOCKER-USER rule. */
  async remove(): Promise<void> {
    await deleteTable(this.run, ingressTableFamily, ingressTableName);
    await removeDockerUserRule(this.run, dockerRule);
  }

  /** Makes sure DOCKER-USER lets the mesh's forwarded packets through; false when the host has no such chain. */
  ensureDockerRule(): Promise<boolean> {
    return ensureDockerUserRule(this.run, dockerRule);
  }

  /**
   * One delete per removed backend, filtered on the reply side (see the header for why not one per
   * flow); returns the flows ended. A delete that fails throws an IngressApplyUnfinishedError
   * owing that backend and those after it.
   */
  private async endFlows(removed: readonly IngressBackend[]): Promise<number> {
    let ended = 0;
    for (const [i, b] of removed.entries()) {
      try {
        ended += await this.endFlowsOf(b);
      } catch (err) {
        throw new IngressApplyUnfinishedError(removed.slice(i), err);
      }
    }
    return ended;
  }

  private async endFlowsOf(b: IngressBackend): Promise<number> {
    const args = backendDeleteArgs(b);
    const r = await this.run('conntrack', args);
    const count = /(\d+) flow entries have been deleted/.exec(r.stderr);
    // "0 flow entries have been deleted" exits 1: nothing was open, not a failure.
    if (r.code !== 0 && count === null) await runChecked(this.run, 'conntrack', args);
    return Number(count?.[1] ?? 0);
  }
}
