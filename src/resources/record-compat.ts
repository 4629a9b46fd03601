// Records that a member of an older release can still read, during a rolling upgrade.
//
// Every member reads the control plane's records with strict schemas (src/resources/state.ts): a
// field it does not know makes the whole record unreadable to it, and an unreadable node or
// service record is as good as absent to that member's loops. A leader of the older release
// would then see a node vanish or a service deleted, and act on it. So fields added after the
// first release are written only when they say something:
//
//   - at their default they are left out (an absent field reads as the default: the schemas
//     give `mesh` null, and a spec's `secrets` and `networks` none), and
//   - with any other value, the command needs the level of the release that added them (5,
//     featureLevelWorkloadNetwork: a node's mesh, a spec's secrets and networks; 6,
//     featureLevelDisruptionBudget: a spec's disruption budget, a service's forced disruptions;
//     6, featureLevelContainerSettings: a spec's container settings, network aliases and fixed
//     addresses, and a
//     secret delivered at an absolute path or owned by a uid/gid other than 0, in a service's or
//     a job's spec, a port published on one address, and a named volume's options; 6,
//     featureLevelIngress: a port
//     published through the routing mesh, ports[].mode ingress, and a node's `ingress`, whether
//     it runs that mesh),
//     which the cluster reaches only once every member runs a release that reads them; before,
//     it is refused with feature_not_enabled and nothing is written.
//
// The resources that exist only from that release (networks, firewall policies, secrets) need
// the level too: a member of an older release would neither enforce nor deliver them.
//
// A secret whose value is sealed (level 6, featureLevelSecretsAtRest), the cluster keyring
// and key holders, and registry logins (an older agent would not send them), need level 6: a member of level 5 reads a secret record with `value` only.
//
// Jobs, their runs and stacks (issues 42 and 39), backup targets and their status (issue 43) and
// replicated volumes (issue 41) are written from level 6 only (featureLevelJobs): a member of
// level 5 would neither run a job, read a stack, take a backup nor keep a volume's copies. So are
// virtual IPs' records, their releases and VIP leases (issue 38, featureLevelVips): a member of
// level 5 has no agent that would add the address, nor a leader loop that would move it.
//
// A constraint on a node's platform or role (`node.platform.os`, `node.platform.arch`,
// `node.role`), in a service's or job's spec or a policy's publish rules, needs level 6 too
// (featureLevelPlatformConstraints): the constraint schema of level 5 does not know them.

import type { Command, Op } from '../../fsm/index.ts';
import type { JsonObject, JsonValue } from '../../fsm/types.ts';
import { featureLevelContainerSettings, featureLevelDisruptionBudget, featureLevelIngress, featureLevelJobs, featureLevelPlatformConstraints, featureLevelSecretsAtRest, featureLevelVips, featureLevelWorkloadNetwork } from '../base/feature-level.ts';
import { vipLeasesCollection, vipReleasesCollection, vipsCollection } from './vips.ts';
import { jobRunsCollection, jobsCollection } from './jobs.ts';
import { stacksCollection } from './stacks.ts';
import { backupStatusCollection, backupTargetsCollection } from './backup-targets.ts';
import { volumesCollection } from './volumes.ts';
import { imagePullsCollection } from './image-pulls.ts';
import { controlFeatureLevel, nodesCollection, registriesCollection, secretsCollection, servicesCollection } from './collections.ts';
import { firewallPoliciesCollection, networksCollection } from './network-resources.ts';
import { clusterKeyHoldersCollection, clusterKeysCollection } from './cluster-keyring.ts';

/** Collections whose every write needs featureLevelWorkloadNetwork. */
const newerCollections = new Set([networksCollection, firewallPoliciesCollection, secretsCollection]);
/**
 * Collections whose every write needs featureLevelJobs: kinds a member of level 5 has no loop or
 * agent for (jobs and their runs, stacks, backup targets and their status, replicated volumes).
 */
const level6Kinds = new Set([jobsCollection, jobRunsCollection, stacksCollection, backupTargetsCollection, backupStatusCollection, volumesCollection]);
/** Collections whose every write needs featureLevelVips: a VIP, its release and a VIP lease (issue 38). */
const vipKinds = new Set([vipsCollection, vipReleasesCollection, vipLeasesCollection]);

const isObject = (v: JsonValue | undefined): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const isEmptyList = (v: JsonValue | undefined): boolean => Array.isArray(v) && v.length === 0;
const isEmptyObject = (v: JsonValue | undefined): boolean => isObject(v) && Object.keys(v).length === 0;

/** A field added after the first release: the level that reads it, and whether a value is its default (left out). */
interface NewerField {
  name: string;
  level: number;
  isDefault: (v: JsonValue | undefined) => boolean;
}

/** A spec's fields added after the first release. */
const newerSpecFields: readonly NewerField[] = [
  { name: 'secrets', level: featureLevelWorkloadNetwork, isDefault: isEmptyList },
  { name: 'networks', level: featureLevelWorkloadNetwork, isDefault: isEmptyList },
  { name: 'disruption', level: featureLevelDisruptionBudget, isDefault: (v) => v === null },
  // Issue 39: the container settings (ContainerSettings in spec/service-spec.ts).
  ...(['workingDir', 'hostname', 'shmSizeBytes'] as const).map((name) => ({ name, level: featureLevelContainerSettings, isDefault: (v: JsonValue | undefined) => v === null })),
  ...(['init', 'readOnlyRootfs'] as const).map((name) => ({ name, level: featureLevelContainerSettings, isDefault: (v: JsonValue | undefined) => v === false })),
  ...(['tmpfs', 'extraHosts', 'dns', 'dnsSearch', 'dnsOptions', 'ulimits'] as const).map((name) => ({ name, level: featureLevelContainerSettings, isDefault: isEmptyList })),
  ...(['sysctls', 'labels'] as const).map((name) => ({ name, level: featureLevelContainerSettings, isDefault: isEmptyObject })),
  // Issue 39: network aliases (spec/network-aliases.ts), the same release.
  { name: 'networkAliases', level: featureLevelContainerSettings, isDefault: isEmptyObject },
  // Issue 39: fixed addresses (spec/network-addresses.ts), the same release.
  { name: 'networkAddresses', level: featureLevelContainerSettings, isDefault: isEmptyObject },
  // Issue 40: a login named by the spec rather than the image's registry's.
  { name: 'registryLogin', level: featureLevelSecretsAtRest, isDefault: (v) => v === null || v === undefined },
];

/** A service record's own fields added after the first release. */
const newerServiceFields: readonly NewerField[] = [
  { name: 'forcedDisruptions', level: featureLevelDisruptionBudget, isDefault: isEmptyList },
  // Issue 40: what the pinned images offer.
  { name: 'imagePlatforms', level: featureLevelSecretsAtRest, isDefault: (v) => v === undefined || isEmptyList(v) },
];

function withoutDefaults(record: JsonObject, fields: readonly NewerField[]): JsonObject {
  const out: JsonObject = { ...record };
  for (const f of fields) if (f.isDefault(out[f.name])) delete out[f.name];
  return out;
}

/** The highest level the fields written in `record` need (0: none). */
function levelOfFields(record: JsonValue | undefined, fields: readonly NewerField[]): number {
  if (!isObject(record)) return 0;
  return Math.max(0, ...fields.filter((f) => record[f.name] !== undefined).map((f) => f.level));
}

/** The record as written: newer fields at their default left out. Other collections unchanged. */
export function forOlderReaders<D extends JsonValue>(collection: string, doc: D): D {
  const record: JsonValue = doc;
  if (!isObject(record)) return doc;
  if (collection === nodesCollection && record.mesh === null) {
    const { mesh: _mesh, ...rest } = record;
    return rest as D;
  }
  if (collection === servicesCollection) {
    const out = withoutDefaults(record, newerServiceFields);
    for (const k of ['spec', 'previousSpec'] as const) {
      const v = out[k];
      if (isObject(v)) out[k] = withoutDefaults(v, newerSpecFields);
    }
    return out as D;
  }
  return doc;
}

/** The level a put needs beyond the control plane's (0: none). */
function putLevel(collection: string, doc: JsonValue): number {
  if (level6Kinds.has(collection)) return featureLevelJobs;
  if (vipKinds.has(collection)) return featureLevelVips;
  if (putNeedsSecretsLevel(collection, doc)) return featureLevelSecretsAtRest;
  if (hasNewerSecretRef(collection, doc)) return featureLevelContainerSettings;
  if (hasHostIp(collection, doc)) return featureLevelContainerSettings;
  if (hasVolumeOptions(collection, doc)) return featureLevelContainerSettings;
  if (hasIngressPort(collection, doc)) return featureLevelIngress;
  if (hasReplicatedMount(collection, doc)) return featureLevelContainerSettings;
  if (constrainedCollections.has(collection) && hasNewerConstraint(doc, 0)) return featureLevelPlatformConstraints;
  if (newerCollections.has(collection)) return featureLevelWorkloadNetwork;
  if (!isObject(doc)) return 0;
  if (collection === nodesCollection) return doc.platform !== undefined ? featureLevelSecretsAtRest : doc.ingress !== undefined ? featureLevelIngress : doc.mesh !== undefined ? featureLevelWorkloadNetwork : 0;
  // Issue 40: what a job's pinned image offers (a level-5 job schema has no such field).
  if (collection === jobsCollection) return doc.imagePlatforms !== undefined ? featureLevelSecretsAtRest : 0;
  if (collection !== servicesCollection) return 0;
  return Math.max(levelOfFields(doc, newerServiceFields), levelOfFields(doc.spec, newerSpecFields), levelOfFields(doc.previousSpec, newerSpecFields));
}

/**
 * Whether a service's or a job's spec (or previous spec) delivers a secret at an absolute path
 * (issue 39's configs): a release of level 5 reads a target as a file name under /run/secrets/;
 * or owned by a uid or gid other than 0 (issue 39's compose uid/gid): its strict schema has no
 * such fields, and its agent would write the file as root's.
 */
function hasNewerSecretRef(collection: string, doc: JsonValue): boolean {
  if ((collection !== servicesCollection && collection !== jobsCollection) || !isObject(doc)) return false;
  // Any uid or gid at all: the readers leave 0 out, and a level-5 schema refuses the field whatever its value.
  const isOwned = (v: JsonValue | undefined): boolean => v !== undefined;
  return [doc.spec, doc.previousSpec].some((spec) => isObject(spec) && Array.isArray(spec.secrets)
    && spec.secrets.some((r) => isObject(r) && ((typeof r.target === 'string' && r.target.startsWith('/')) || isOwned(r.uid) || isOwned(r.gid))));
}

/** Whether a service's spec (or previous spec) publishes a port on one address of the node (issue 39's ports[].host_ip). */
function hasHostIp(collection: string, doc: JsonValue): boolean {
  if (collection !== servicesCollection || !isObject(doc)) return false;
  return [doc.spec, doc.previousSpec].some((spec) => isObject(spec) && Array.isArray(spec.ports) && spec.ports.some((p) => isObject(p) && p.hostIp !== undefined));
}

/**
 * Whether a service's or a job's spec (or previous spec) gives a named volume options (issue 39's
 * compose driver_opts): a level-5 schema refuses the field, and its agent would let Docker
 * create the volume without them.
 */
function hasVolumeOptions(collection: string, doc: JsonValue): boolean {
  if ((collection !== servicesCollection && collection !== jobsCollection) || !isObject(doc)) return false;
  return [doc.spec, doc.previousSpec].some((spec) => isObject(spec) && Array.isArray(spec.mounts) && spec.mounts.some((m) => isObject(m) && m.volumeOptions !== undefined));
}

/** Whether a service's spec (or previous spec) publishes a port through the routing mesh (issue 38's ports[].mode ingress). */
function hasIngressPort(collection: string, doc: JsonValue): boolean {
  if (collection !== servicesCollection || !isObject(doc)) return false;
  return [doc.spec, doc.previousSpec].some((spec) => isObject(spec) && Array.isArray(spec.ports) && spec.ports.some((p) => isObject(p) && p.mode !== undefined));
}

/** Whether a service's spec (or previous spec) replicates a volume (issue 41): a level-5 schema refuses `replicate`. */
function hasReplicatedMount(collection: string, doc: JsonValue): boolean {
  if (collection !== servicesCollection || !isObject(doc)) return false;
  return [doc.spec, doc.previousSpec].some((spec) => isObject(spec) && Array.isArray(spec.mounts) && spec.mounts.some((m) => isObject(m) && m.replicate !== undefined));
}

/** Collections whose records hold constraints (a service's and a job's spec, a policy's publish rules). */
const constrainedCollections = new Set([servicesCollection, jobsCollection, networksCollection, firewallPoliciesCollection]);
/** Constraint attributes a release of level 5 or less cannot read (its schema's enum lacks them). */
const newerConstraintAttributes = new Set(['os', 'arch', 'role']);

/** Whether the record holds a constraint on a node's platform or role, anywhere in it (depth-limited: records are shallow). */
function hasNewerConstraint(v: JsonValue | undefined, depth: number): boolean {
  if (depth > 8 || typeof v !== 'object' || v === null) return false;
  if (Array.isArray(v)) return v.some((x) => hasNewerConstraint(x, depth + 1));
  if (typeof v.attribute === 'string' && typeof v.operator === 'string' && newerConstraintAttributes.has(v.attribute)) return true;
  return Object.values(v).some((x) => hasNewerConstraint(x, depth + 1));
}

/** Writes that only a release of level 6 reads: a sealed secret, the keyring, the key holders, a registry login, a pull request. */
function putNeedsSecretsLevel(collection: string, doc: JsonValue): boolean {
  if (collection === clusterKeysCollection || collection === clusterKeyHoldersCollection || collection === registriesCollection) return true;
  // Issue 40: a pull before a stop on another node (image-pulls.ts).
  if (collection === imagePullsCollection) return true;
  return collection === secretsCollection && isObject(doc) && doc.sealed !== undefined;
}

function opsOf(cmd: Command): Op[] {
  if (cmd.op === 'txn') return [...cmd.success, ...cmd.failure];
  return cmd.op === 'put' || cmd.op === 'delete' ? [cmd] : [];
}

function compatOp<T extends Op>(op: T): T {
  return op.op === 'put' ? { ...op, doc: forOlderReaders(op.collection, op.doc) } : op;
}

/**
 * The command with its records as older members read them, and the feature level it needs:
 * the control plane's, or the level of the release that reads what it writes when only a newer
 * member reads it (featureLevelSecretsAtRest for a sealed secret or the keyring).
 */
export function compatCommand<C extends Command>(cmd: C): { cmd: C; featureLevel: number } {
  const out: C = cmd.op === 'txn' ? { ...cmd, success: cmd.success.map(compatOp), failure: cmd.failure.map(compatOp) }
    : cmd.op === 'put' ? compatOp(cmd) as C : cmd;
  // A delete needs no level: it writes nothing an older member could fail to read.
  const level = Math.max(0, ...opsOf(out).map((op) => (op.op === 'put' ? putLevel(op.collection, op.doc) : 0)));
  return { cmd: out, featureLevel: Math.max(level, controlFeatureLevel) };
}
