// The audit collection's name (the records themselves are written in apply: fsm/).
export const auditCollection = 'shoal.audit';
