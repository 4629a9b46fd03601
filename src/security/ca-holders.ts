// Which members hold the CA key, in the reserved replicated collection `shoal.ca-holders` (the
// record only, never the key). Removing such a member leaves a copy of the key on a machine that
// is no longer trusted, which no deny-list can undo: the removal answers with a warning that
// tells the operator to rotate the CA (docs/security.md, "Rotating the CA").

import { encodeCommand, type DocumentStore } from '../../fsm/index.ts';
import type { Logger } from '../log.ts';
import type { Proposer } from '../ports/proposer.ts';

export const caHoldersCollection = 'shoal.ca-holders';
const retryMs = 1_000;
const attemptsMax = 120;

/** Records that `nodeId` holds the CA key, once a leader takes the write; retries quietly meanwhile. */
export function announceCaHolder(node: Proposer, store: DocumentStore, nodeId: string, log: Logger): { cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  let cancelled = false;
  const attempt = async (n: number): Promise<void> => {
    if (cancelled || store.get(caHoldersCollection, nodeId) !== undefined) return;
    try {
      const cmd = { op: 'put' as const, collection: caHoldersCollection, id: nodeId, doc: { since: Date.now() }, expect: { absent: true as const } };
      await node.propose(encodeCommand({ cmd, ts: Date.now(), principal: 'shoal' }));
      return;
    } catch (err) {
      if (n >= attemptsMax) {
        log.warn(`could not record that this node holds the CA key: ${(err as Error).message}`);
        return;
      }
    }
    if (!cancelled) timer = setTimeout(() => { void attempt(n + 1); }, retryMs);
  };
  void attempt(1);
  return { cancel() { cancelled = true; clearTimeout(timer); } };
}

/** The warning for removing `nodeId`, when it held the CA key. */
export function caHolderWarning(store: DocumentStore, nodeId: string, name: string): string | undefined {
  if (store.get(caHoldersCollection, nodeId) === undefined) return undefined;
  return `${name} (${nodeId}) held the cluster CA key, and a removed machine keeps its copy: it can still sign certificates for new node ids, which no deny-list refuses. Replace the CA: run 'shoal ca rotate' (docs/security.md, "Rotating the CA").`;
}
