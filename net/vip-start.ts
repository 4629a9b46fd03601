// Starts a node's VIP agent (vip-agent.ts) on the host: the real command runner (`ip`, `arping`),
// its VIP lease (vip-lease.ts), and releases and renewals proposed through the node as the
// agent's own writes.

import type { DocumentStore } from '../fsm/index.ts';
import { encodeCommand, type CommandResult, type TxnCommand } from '../fsm/index.ts';
import type { Proposer } from '../src/ports/proposer.ts';
import { compatCommand } from '../src/resources/record-compat.ts';
import type { CommandRunner } from './firewall-command.ts';
import { commandRunner } from './firewall-command.ts';
import { VipAgent } from './vip-agent.ts';
import { VipLeaseKeeper } from './vip-lease.ts';

export function startVipAgent(o: {
  node: Proposer; store: DocumentStore; nodeId: string; bootNow(): number;
  /** The VIP lease (config `vipLeaseMs`). */
  leaseMs: number;
  log: { info(msg: string): void; warn(msg: string): void }; run?: CommandRunner; onChange?: (address: string, held: boolean) => void;
}): VipAgent {
  const propose = async (cmd: TxnCommand): Promise<CommandResult> => {
    const compat = compatCommand(cmd);
    const data = encodeCommand({ cmd: compat.cmd, ts: Date.now(), principal: `shoal:agent:${o.nodeId}` });
    const { result } = await o.node.propose(data, { featureLevel: compat.featureLevel });
    return result as CommandResult;
  };
  // The agent is made just below; a renewal commits only after it has started.
  const lease = new VipLeaseKeeper({ store: o.store, nodeId: o.nodeId, leaseMs: o.leaseMs, bootNow: o.bootNow, propose, log: o.log, onRenewed: () => agent.kick() });
  const agent = new VipAgent({
    store: o.store, nodeId: o.nodeId, lease, bootNow: o.bootNow, run: o.run ?? commandRunner({ timeoutMs: 5_000 }), log: o.log, propose,
    ...(o.onChange !== undefined ? { onChange: o.onChange } : {}),
  });
  agent.start();
  return agent;
}
