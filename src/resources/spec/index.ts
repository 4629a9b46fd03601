// The spec vocabulary: strict parsing of Service documents (and later Network and
// FirewallPolicy), the normalized spec, and what a change of spec does to running tasks.

export { parseSpecs, parseSpecObjects, refusal, apiVersion, type SpecSet } from './documents.ts';
export { specChange, changedFields, jsonEqual, type SpecChange } from './spec-change.ts';
export { renderService } from './render.ts';
export { serviceFieldNames } from './service-reader.ts';
export type { Problem } from './reader.ts';
export { specLimits } from './limits.ts';
export {
  parseConstraint, matchesConstraint, formatConstraint, labelKeyPattern, labelValuePattern,
  type Constraint, type ConstraintSubject, type ConstraintAttribute, type ConstraintOperator,
} from './constraint.ts';
export { parseCpu, parseMemory, parseDuration, formatCpu, formatMemory, renderCpu, renderMemory, renderDuration } from './quantity.ts';
export {
  serviceSpecSchema, constraintSchema,
  type ServiceSpec, type ResourceAmounts, type ResourceLimits, type PortSpec, type MountSpec, type DeviceSpec, type HealthCheckSpec,
  type PlacementSpec, type LogSpec, type RestartPolicy, type UpdatePolicy, type SecretRefSpec,
} from './service-spec.ts';
export { jobSpecSchema, type JobSpec, type JobConcurrency } from './job-spec.ts';
export { jobFieldNames, jobHistoryMax } from './job-reader.ts';
export {
  parseSchedule, nextAfter, latestAtOrBefore, countBetween, describeSchedule, isTimeZone, type Schedule,
} from './schedule.ts';
