// `nft` for the drills' isolate action (docs/operations.md, "Failover drills"), through the one
// command runner (src/base/run-command.ts): arguments as arrays (a ruleset on standard input,
// never a shell string), JSON output where it is read, a timeout on every call, and its failure
// turned into `drill_action_failed` with what to do about it.
//
// The cut lives in its own table, `inet shoal_drill`: a set of TCP ports whose elements carry a
// timeout, and an input and an output chain that drop packets to those ports. The kernel removes
// an element when its timeout passes, so the cut heals even if the node that asked for it dies
// meanwhile. The set holds peer ports only: the client API port is never in it, so the drill can
// still talk to the node it isolated.

import { CommandError, runCommand } from '../../base/run-command.ts';
import { ShoalError } from '../../errors.ts';

export const drillTable = 'shoal_drill';
export const drillSet = 'isolated_ports';
/** An nft call that has not returned in this long is abandoned. */
const nftTimeoutMs = 5000;

const ruleset = `table inet ${drillTable} {
  set ${drillSet} { type inet_service; flags timeout; }
  chain input { type filter hook input priority -10; policy accept; tcp dport @${drillSet} drop; }
  chain output { type filter hook output priority -10; policy accept; tcp dport @${drillSet} drop; }
}
`;

/** Runs `nft ARGS` (with `stdin`, if given); resolves with its standard output. */
export async function nft(args: readonly string[], stdin?: string): Promise<string> {
  try {
    return (await runCommand('nft', args, { timeoutMs: nftTimeoutMs, input: stdin })).stdout;
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    throw new ShoalError('drill_action_failed', err.reason === 'not_found'
      ? 'isolate needs nftables: the nft command is not installed on this node (apt-get install nftables); nothing was changed'
      : `${err.message} (isolate needs root, or CAP_NET_ADMIN); nothing was changed`, { command: 'nft', args: [...args], reason: err.reason });
  }
}

/** Creates the table, set and chains unless they exist (another node on this machine may have made them). */
async function ensureTable(): Promise<void> {
  try {
    await nft(['-j', 'list', 'table', 'inet', drillTable]);
    return;
  } catch {
    // Absent: create it below.
  }
  await nft(['-f', '-'], ruleset);
}

/** Drops TCP packets to `ports` for `seconds`; the kernel lifts it by itself. */
export async function isolatePorts(ports: readonly number[], seconds: number): Promise<void> {
  await ensureTable();
  const elements = ports.map((p) => `${p} timeout ${seconds}s`).join(', ');
  // `add` on an element already present keeps the old timeout; delete it first so the new one holds.
  await nft(['-f', '-'], `${ports.map((p) => `delete element inet ${drillTable} ${drillSet} { ${p} }`).join('\n')}\n`).catch(() => undefined);
  await nft(['add', 'element', 'inet', drillTable, drillSet, `{ ${elements} }`]);
}

/** Lifts the cut of `ports` now (a drill that ends early). */
export async function healPorts(ports: readonly number[]): Promise<void> {
  for (const p of ports) await nft(['delete', 'element', 'inet', drillTable, drillSet, `{ ${p} }`]).catch(() => undefined);
}
