// Starts a node's VIP agent (vip-agent.ts) on the host: the real command runner (`ip`, `arping`),
// the node agent's lease, and releases proposed through the node as the agent's own writes.

import type { DocumentStore } from '../fsm/index.ts';
import { encodeCommand, type CommandResult } from '../fsm/index.ts';
import type { Proposer } from '../src/ports/proposer.ts';
import { compatCommand } from '../src/resources/record-compat.ts';
import type { CommandRunner } from './firewall-command.ts';
import { commandRunner } from './firewall-command.ts';
import { VipAgent, type VipLease } from './vip-agent.ts';

export function startVipAgent(o: {
  node: Proposer; store: DocumentStore; nodeId: string; lease: VipLease | null; bootNow(): number;
  log: { info(msg: string): void; warn(msg: string): void }; run?: CommandRunner; onChange?: (address: string, held: boolean) => void;
}): VipAgent {
  const agent = new VipAgent({
    store: o.store, nodeId: o.nodeId, lease: o.lease, bootNow: o.bootNow, run: o.run ?? commandRunner({ timeoutMs: 5_000 }), log: o.log,
    propose: async (cmd) => {
      const compat = compatCommand(cmd);
      const data = encodeCommand({ cmd: compat.cmd, ts: Date.now(), principal: `shoal:agent:${o.nodeId}` });
      const { result } = await o.node.propose(data, { featureLevel: compat.featureLevel });
      return result as CommandResult;
    },
    ...(o.onChange !== undefined ? { onChange: o.onChange } : {}),
  });
  agent.start();
  return agent;
}
