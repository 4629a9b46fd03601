// Starts a node's routing mesh loop on the host (config ingress.enabled, docker runtime only):
// the real command runner and the node's term; the firewall's setting says whether publish
// rules choose the ingress ports this node opens.

import type { DocumentStore } from '../fsm/index.ts';
import type { Logger } from '../src/log.ts';
import type { TermSource } from '../src/ports/term-source.ts';
import { commandRunner } from './firewall-command.ts';
import { Ingress } from './ingress.ts';
import { IngressLoop } from './ingress-loop.ts';

export function startIngress(o: { node: TermSource; store: DocumentStore; nodeId: string; firewallEnabled: boolean; preferLocal: boolean; log: Logger }): IngressLoop {
  const loop = new IngressLoop({
    store: o.store, nodeId: o.nodeId, term: () => o.node.currentTerm, firewallEnabled: o.firewallEnabled, preferLocal: o.preferLocal,
    ingress: new Ingress(commandRunner(), (line) => o.log.warn(`ingress: ${line}`)),
    log: { info: (m) => o.log.info(m), warn: (m) => o.log.warn(m) },
  });
  loop.start();
  return loop;
}
