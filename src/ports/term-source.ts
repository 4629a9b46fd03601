// The port for what a fenced part needs to know of leadership: the term this node is in, the
// term of the last entry it applied, whether it leads.

export interface TermSource {
  readonly currentTerm: number;
  /** The term of the last entry applied here: a new leader's view is whole once it equals currentTerm. */
  readonly appliedTerm: number;
  readonly isLeader: boolean;
}
