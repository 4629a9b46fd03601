// The audit collection's name (the records themselves are written in apply: fsm/audit.ts).
export { auditCollection } from '../../fsm/audit.ts';
