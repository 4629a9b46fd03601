// The cluster feature level: which kinds of log entries the cluster may write.
//
// A rolling upgrade mixes releases. A command that an older node cannot apply must never be
// written while such a node is a member, or that node stops (upgrade_required) and the cluster
// loses a member it counted on. So the cluster runs at a committed level: the highest level
// that every member, learners too, supports. The leader raises it, with a log entry, once the
// last member reports (in its transport hello) that it supports more; a node refuses at propose
// time any command that needs a level above the committed one (feature_not_enabled). The level
// never goes down: a member of an older release cannot rejoin once the level is raised past it,
// which the handshake refuses with protocol_unsupported only when protocols differ, so the
// leader also refuses to add a learner whose level is below the committed one.
//
// Levels:
//   1  the first release: document commands; log time is the largest proposer stamp applied.
//   2  feature-level entries; log time stamped by the leader from its monotonic clock, so a
//      node whose wall clock is ahead cannot push idempotency expiry forward (docs/architecture.md);
//      fenced commands, value compares, the control plane's collections.
//   3  proposals carry their proposer's term; an entry whose proposer term is not its own is a
//      no-op, so a node may propose a write again once its term has passed without it, and a
//      change of leader fails no request (src/node/proposals.ts).
//   4  apply writes an audit record (collection shoal.audit, fsm/audit.ts) for each client
//      mutation, and trims the oldest: a state an older node would not produce.
//   5  records carry what a release of level 4 or less cannot read (src/resources/record-compat.ts):
//      a node's WireGuard mesh, a service's secrets and networks; networks, firewall policies
//      and secrets are written at all. And commands may carry the role the API authenticated
//      their sender with (`role` in the stamped command, fsm/command.ts), which the audit record
//      says: a release before this refuses the key (its command schema is strict). Both came
//      in the same release, so they share the level.
//   6  service records carry a disruption budget (spec.disruption) and the disruptions forced past
//      it (forcedDisruptions), which a release of level 5 or less cannot read
//      (src/resources/record-compat.ts). And secrets at rest: a secret's value is written
//      encrypted (`sealed`, wrapped by the cluster key) rather than in the clear, and the cluster keyring and key holders exist (collections
//      shoal.cluster-keys, shoal.cluster-key-holders); the store takes the `compact` command,
//      which drops its retained watch events (fsm/store.ts). A release of level 5 can neither
//      read a sealed record nor apply a compaction. Reaching the level, the leader re-encrypts
//      the plain values and each node rewrites its log and snapshot files without them
//      (docs/security.md, "Secrets at rest"). Both came in the same release, so they share the
//      level.
//      Service specs may also carry container settings (working directory, hostname, init,
//      read-only root, /dev/shm size, tmpfs, /etc/hosts entries, DNS, ulimits, sysctls, labels:
//      issue 39's Compose fields), which a release of level 5 or less cannot read.
//      Jobs, their runs and stacks (collections shoal.jobs, shoal.job-runs, shoal.stacks) are
//      written from this level only (featureLevelJobs): a release of level 5 runs no job.

/** The highest level this build can apply. */
export const featureLevelMax = 6;

/** The level a cluster starts at before any feature-level entry: the first release's. */
export const featureLevelInitial = 1;

/** The level from which entries carry a leader-stamped log time. */
export const featureLevelLeaderClock = 2;

/** The level from which proposals carry their proposer's term (re-proposal across a change of leader). */
export const featureLevelHandover = 3;

/**
 * The level the leader may commit: the lowest of what every member supports. Members it has not
 * heard from (no handshake yet) hold it back: the result is undefined until all are known.
 */
export function supportedByAll(members: readonly string[], self: string, selfMax: number, supportedBy: (id: string) => number | undefined): number | undefined {
  let level = selfMax;
  for (const id of members) {
    if (id === self) continue;
    const peer = supportedBy(id);
    if (peer === undefined) return undefined;
    level = Math.min(level, peer);
  }
  return level;
}

/** The level from which apply writes audit records (fsm/audit.ts). */
export const featureLevelAudit = 4;

/** The level from which records may carry the mesh, secrets and networks (src/resources/record-compat.ts). */
export const featureLevelWorkloadNetwork = 5;

/** The level from which commands may carry their sender's role, and audit records show it (fsm/audit.ts). */
export const featureLevelAuditRole = 5;

/** The level from which service records may carry a disruption budget and forced disruptions (src/resources/record-compat.ts). */
export const featureLevelDisruptionBudget = 6;

/** The level from which secrets are written encrypted and the store takes `compact` (docs/security.md, "Secrets at rest"). */
export const featureLevelSecretsAtRest = 6;

/**
 * The level from which specs may hold constraints on a node's platform or role (node.platform.os,
 * node.platform.arch, node.role; src/resources/spec/constraint.ts): level 6's release, the
 * same that writes the node's platform in its record.
 */
export const featureLevelPlatformConstraints = 6;

/** The level from which service specs may carry container settings (ContainerSettings, src/resources/record-compat.ts). */
export const featureLevelContainerSettings = 6;

/**
 * The level from which jobs, their runs and stacks are written (collections shoal.jobs,
 * shoal.job-runs, shoal.stacks): level 6's release. A member of level 5 has no loop that runs a
 * job, no agent that reads a job's task, and no reader of a stack's record.
 */
export const featureLevelJobs = 6;

/**
 * The level from which a service's ports may be published through the routing mesh
 * (ports[].mode `ingress`, docs/network.md "Ingress"): level 6's release. A member of level 5
 * would refuse the field, and publish the port on its own node only.
 */
export const featureLevelIngress = 6;

/**
 * The level from which virtual IPs' records are written (collections shoal.vips,
 * shoal.vip-releases, shoal.vip-leases; docs/network.md "Virtual IP"): level 6's release. A
 * member of level 5 has no agent that would add or drop the address, so a VIP given to it would
 * never answer, and a leader of level 5 would never move it.
 */
export const featureLevelVips = 6;
