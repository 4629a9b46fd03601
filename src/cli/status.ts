// shoal status: leader, term, commit index and members, from GET /v1/cluster of any node.

import { exitCodes, parse } from './args.ts';
import type { ClusterView } from '../api/cluster-routes.ts';

export const statusHelp = (name = 'status'): string => `Usage: shoal ${name} [--addr HOST:PORT] [--json]

Shows the cluster's leader, term, commit and applied index, and each member's role,
replication lag and health, as reported by the node at --addr (which asks the leader).

Options:
  --addr HOST:PORT   a node's client API (default 127.0.0.1:7101, or $SHOAL_ADDR)
  --json             print the same as JSON
  -h, --help         show this help

Exit codes: 0 ok, 3 the node cannot be reached or there is no leader, 2 usage error.`;

/** Also `shoal cluster status` (`name` says which, for help and messages). */
export async function statusCommand(argv: string[], name = 'status'): Promise<number> {
  const { values } = parse(argv, {
    addr: { type: 'string' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, name);
  if (values.help) {
    console.log(statusHelp(name));
    return exitCodes.ok;
  }
  const addr = values.addr ?? process.env.SHOAL_ADDR ?? '127.0.0.1:7101';
  let view: ClusterView;
  try {
    const res = await fetch(`http://${addr}/v1/cluster`, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
    view = (await res.json()) as ClusterView;
  } catch (err) {
    console.error(`shoal ${name}: cannot reach ${addr}: ${(err as Error).message}\nIs a node running there? Start one with 'shoal serve' or 'shoal dev'.`);
    return exitCodes.unavailable;
  }
  if (values.json) console.log(JSON.stringify(view, null, 2));
  else printStatus(view);
  return view.leader === null ? exitCodes.unavailable : exitCodes.ok;
}

function printStatus(v: ClusterView): void {
  const leaderName = v.members.find((m) => m.id === v.leader)?.name ?? v.leader ?? '(none)';
  console.log(`cluster  ${v.clusterId}`);
  console.log(`leader   ${leaderName}${v.leader ? ` (${v.leader})` : ''}   term ${v.term}   commit ${v.commitIndex}   applied ${v.appliedIndex}`);
  if (v.view === 'local') console.log('(leader unreachable: showing this node\'s local view)');
  const rows = v.members.map((m) => [
    m.name, m.id, m.role + (m.id === v.leader ? '*' : ''), m.apiAddress, m.matchIndex?.toString() ?? '-', m.lag?.toString() ?? '-',
    m.rttMs === null ? '-' : m.rttMs.toFixed(1), m.health,
  ]);
  table(['NAME', 'ID', 'ROLE', 'API', 'MATCH', 'LAG', 'RTT MS', 'HEALTH'], rows);
}

export function table(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  console.log(line(head));
  for (const r of rows) console.log(line(r));
}
