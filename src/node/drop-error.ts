// The typed error a client gets when the core refuses its proposal, read or request.

import { ProposalDroppedError } from '../raft/types.ts';
import { ShoalError } from '../errors.ts';

/** The core's refusal as the error the client sees; any other error is passed through. */
export function translateDrop(err: unknown): Error {
  if (err instanceof ProposalDroppedError) {
    if (err.reason === 'noLeader') return new ShoalError('no_leader', 'the cluster has no leader right now; retry shortly');
    if (err.reason === 'invalidConfChange') return new ShoalError('bad_request', 'the membership change is not valid for the current configuration (e.g. it removes the last voter)', { reason: err.reason });
    return new ShoalError('proposal_dropped', `the leader refused the request: ${err.reason}`, { reason: err.reason });
  }
  return err instanceof Error ? err : new Error(String(err));
}
