// shoal status: leader, term, commit index and members, from GET /v1/cluster of any node.

import { exitCodes, parse, UsageError } from './args.ts';
import { resolveAddr } from './client.ts';
import { byName, getView, label, mixedVersions, table, type View } from './cluster-view.ts';

export const statusHelp = (name = 'status'): string => `Usage: shoal ${name} [--addr HOST:PORT] [--json]

Shows the cluster's leader, term, commit and applied index, and each member (sorted by name)
with its role, replication lag, software version and health, as reported by the node at --addr
(which asks the leader).

Options:
  --addr HOST:PORT   a node's client API (default $SHOAL_ADDR, else 127.0.0.1:7101)
  --json             print the same as JSON (GET /v1/cluster)
  -h, --help         show this help

Exit codes: 0 ok, 2 usage error, 3 the node cannot be reached or there is no leader.`;

/** Also `shoal cluster status` (`name` says which, for help and messages). */
export async function statusCommand(argv: string[], name = 'status'): Promise<number> {
  const help = statusHelp(name);
  const { values, positionals } = parse(argv, {
    addr: { type: 'string' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, help);
  if (values.help) {
    console.log(help);
    return exitCodes.ok;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const view = await getView(resolveAddr(values.addr));
  if (values.json) console.log(JSON.stringify(view, null, 2));
  else printStatus(view);
  return view.leader === null ? exitCodes.unavailable : exitCodes.ok;
}

function printStatus(v: View): void {
  const leader = v.members.find((m) => m.id === v.leader);
  const answered = v.members.find((m) => m.id === v.node);
  console.log(`cluster  ${v.clusterId}${v.softwareVersion !== undefined ? `   (answered by ${answered?.name ?? v.node}, shoal ${v.softwareVersion})` : ''}`);
  console.log(`leader   ${leader !== undefined ? label(leader) : v.leader ?? '(none)'}   term ${v.term}   commit ${v.commitIndex}   applied ${v.appliedIndex}`);
  if (v.view === 'local') console.log('(leader unreachable: showing this node\'s local view)');
  const rows = byName(v.members).map((m) => [
    m.name, m.id, m.role + (m.id === v.leader ? '*' : ''), m.apiAddress, m.matchIndex?.toString() ?? '-', m.lag?.toString() ?? '-',
    m.rttMs === null ? '-' : m.rttMs.toFixed(1), m.softwareVersion ?? '-', m.health,
  ]);
  table(['NAME', 'ID', 'ROLE', 'API', 'MATCH', 'LAG', 'RTT MS', 'VERSION', 'HEALTH'], rows);
  const mixed = mixedVersions(v);
  if (mixed !== undefined) console.log(`members run different versions: ${mixed}`);
  if (v.featureLevel !== undefined) {
    const levels = v.members.map((m) => m.featureLevelMax).filter((l): l is number => typeof l === 'number');
    const reachable = levels.length === 0 ? v.featureLevel : Math.min(...levels);
    console.log(`feature level ${v.featureLevel}${reachable > v.featureLevel ? ` (every member supports ${reachable}: the leader raises it shortly)` : reachable < v.featureLevel ? '' : ' (the highest every member supports)'}`);
  }
}
