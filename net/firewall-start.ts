// Starts a node's firewall loop on the host (config `firewall.enabled`): the real command
// runner, the management ports from the node's own listen addresses, and the node's term.

import type { DocumentStore } from '../fsm/index.ts';
import type { Logger } from '../src/log.ts';
import type { TermSource } from '../src/ports/term-source.ts';
import { splitHostPort } from '../src/base/host-port.ts';
import { commandRunner } from './firewall-command.ts';
import { Firewall } from './firewall.ts';
import { FirewallLoop } from './firewall-loop.ts';

export function startFirewall(o: { node: TermSource; store: DocumentStore; nodeId: string; apiListen: string; peerListen: string; log: Logger }): FirewallLoop {
  const loop = new FirewallLoop({
    store: o.store, nodeId: o.nodeId, term: () => o.node.currentTerm,
    managementPorts: [splitHostPort(o.apiListen).port, splitHostPort(o.peerListen).port],
    firewall: new Firewall(commandRunner(), (line) => o.log.warn(`firewall: ${line}`)),
    log: { info: (m) => o.log.info(m), warn: (m) => o.log.warn(m) },
  });
  loop.start();
  return loop;
}
