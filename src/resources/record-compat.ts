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
//   - with any other value, the command needs feature level 5 (featureLevelWorkloadNetwork), which
//     the cluster reaches only once every member runs a release that reads them; before, it is
//     refused with feature_not_enabled and nothing is written.
//
// The resources that exist only from that release (networks, firewall policies, secrets) need
// the level too: a member of an older release would neither enforce nor deliver them.
//
// A secret whose value is sealed (level 6, featureLevelSecretsAtRest), and the cluster keyring
// and key holders, need level 6: a member of level 5 reads a secret record with `value` only.

import type { Command, Op } from '../../fsm/index.ts';
import type { JsonObject, JsonValue } from '../../fsm/types.ts';
import { featureLevelSecretsAtRest, featureLevelWorkloadNetwork } from '../base/feature-level.ts';
import { controlFeatureLevel, nodesCollection, secretsCollection, servicesCollection } from './collections.ts';
import { firewallPoliciesCollection, networksCollection } from './network-resources.ts';
import { clusterKeyHoldersCollection, clusterKeysCollection } from './cluster-keyring.ts';

/** Collections whose every write needs featureLevelWorkloadNetwork. */
const newerCollections = new Set([networksCollection, firewallPoliciesCollection, secretsCollection]);

/** A spec's fields added after the first release, each with its default (left out when equal). */
const newerSpecFields = ['secrets', 'networks'] as const;

const isObject = (v: JsonValue | undefined): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const isEmptyList = (v: JsonValue | undefined): boolean => Array.isArray(v) && v.length === 0;

function withoutDefaultSpecFields(spec: JsonValue | undefined): JsonValue | undefined {
  if (!isObject(spec)) return spec;
  const out: JsonObject = { ...spec };
  for (const f of newerSpecFields) if (isEmptyList(out[f])) delete out[f];
  return out;
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
    const out: JsonObject = { ...record };
    for (const k of ['spec', 'previousSpec'] as const) {
      const v = withoutDefaultSpecFields(out[k]);
      if (v !== undefined) out[k] = v;
    }
    return out as D;
  }
  return doc;
}

function putNeedsNewerLevel(collection: string, doc: JsonValue): boolean {
  if (newerCollections.has(collection)) return true;
  if (!isObject(doc)) return false;
  if (collection === nodesCollection) return doc.mesh !== undefined;
  if (collection !== servicesCollection) return false;
  return [doc.spec, doc.previousSpec].some((s) => isObject(s) && newerSpecFields.some((f) => s[f] !== undefined));
}

/** Writes that only a release of level 6 reads: a sealed secret, the keyring, the key holders. */
function putNeedsSecretsLevel(collection: string, doc: JsonValue): boolean {
  if (collection === clusterKeysCollection || collection === clusterKeyHoldersCollection) return true;
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
 * the control plane's, featureLevelWorkloadNetwork when it writes something only a newer member
 * reads, or featureLevelSecretsAtRest for a sealed secret or the keyring.
 */
export function compatCommand<C extends Command>(cmd: C): { cmd: C; featureLevel: number } {
  const out: C = cmd.op === 'txn' ? { ...cmd, success: cmd.success.map(compatOp), failure: cmd.failure.map(compatOp) }
    : cmd.op === 'put' ? compatOp(cmd) as C : cmd;
  // A delete needs no level: it writes nothing an older member could fail to read.
  const puts = opsOf(out).filter((op) => op.op === 'put');
  if (puts.some((op) => putNeedsSecretsLevel(op.collection, op.doc))) return { cmd: out, featureLevel: featureLevelSecretsAtRest };
  const newer = puts.some((op) => putNeedsNewerLevel(op.collection, op.doc));
  return { cmd: out, featureLevel: newer ? featureLevelWorkloadNetwork : controlFeatureLevel };
}
