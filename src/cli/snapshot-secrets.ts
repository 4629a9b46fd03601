// The secrets of a snapshot restored on new machines (docs/security.md, "The recovery key"). The
// snapshot holds them encrypted, and the keyring's public keys, and each cluster key sealed to the
// recovery key; never a cluster key itself. With the recovery key the restore opens those keys
// and writes them into the new node's data directory: the new cluster reads the old secrets.
// Without it the restore is refused, or, asked to (--discard-secrets), the new cluster gets keys
// of its own and a new recovery key, and the old secrets stay unreadable until each is set again.

import type { KeyObject } from 'node:crypto';
import { DocumentStore } from '../../fsm/index.ts';
import { foundingKeyring, writePendingKeyring, type PendingKeyring } from '../node/secrets/pending-keyring.ts';
import { readKeyring, type Keyring } from '../resources/cluster-keyring.ts';
import { secretsCollection } from '../resources/collections.ts';
import { privateKeyOf, rawPublicKey, unwrapDataKey } from '../resources/secret-crypto.ts';
import { isSealed, secretRecordSchema, type SealedSecretRecord } from '../resources/secrets.ts';
import { allDocs } from '../resources/state.ts';
import { ClusterKeyFiles } from '../security/cluster-key-files.ts';
import { parseKeyText, recoveryKeyPrefix } from '../security/unlock-key.ts';
import { exitCodes } from './args.ts';
import { CliFailure } from './client.ts';

export interface SecretsRestorePlan {
  /** Secrets the new cluster can read. */
  readable: number;
  /** Secrets it cannot (their key was not opened), by name. */
  unreadable: string[];
  /** Cluster keys opened with the recovery key. */
  keys: { id: string; privateKey: KeyObject }[];
  /** A keyring for the new cluster's first leader to write. */
  pending: PendingKeyring | undefined;
  /** The new cluster gets keys of its own (the old ones could not be opened); these are retired. */
  fresh: string[] | null;
}

/** What the restore does with the snapshot's secrets; throws, before anything is written, when it cannot. */
export function planSecretsRestore(app: Uint8Array, file: string, recoveryText: string | undefined, discard: boolean): SecretsRestorePlan {
  const store = new DocumentStore();
  store.restore(app);
  const keyring = readKeyring(store)?.keyring;
  const records = [...allDocs(store, secretsCollection)].flatMap((d) => {
    const r = secretRecordSchema.safeParse(d.doc);
    return r.success ? [r.data] : [];
  });
  const sealed = records.filter(isSealed);
  if (keyring === undefined && sealed.length === 0) return { readable: records.length, unreadable: [], keys: [], pending: undefined, fresh: null };
  if (recoveryText !== undefined) return withRecoveryKey(recoveryText, file, keyring, records.length, sealed);
  if (sealed.length > 0 && !discard) {
    throw new CliFailure(
      `${file} holds ${sealed.length} encrypted secret(s) (${sealed.map((r) => r.name).slice(0, 10).join(', ')}${sealed.length > 10 ? ', ...' : ''}); on new machines they can be read only with the old cluster's recovery key. ` +
      'Give it with --recovery-key-file FILE (or --recovery-key-stdin), or restore without them with --discard-secrets (each must then be set again); nothing was written',
      exitCodes.failed, 'recovery_key_required', { details: { secrets: sealed.length } },
    );
  }
  return { readable: records.length - sealed.length, unreadable: sealed.map((r) => r.name), keys: [], pending: undefined, fresh: keyring?.keys.map((k) => k.id) ?? [] };
}

function withRecoveryKey(text: string, file: string, keyring: Keyring | undefined, total: number, sealed: readonly SealedSecretRecord[]): SecretsRestorePlan {
  const raw = parseKeyText(recoveryKeyPrefix, text);
  if (raw === undefined) throw new CliFailure(`that is not a recovery key (it is ${recoveryKeyPrefix} and 43 letters, digits, - and _, as shoal init printed it); nothing was written`, exitCodes.failed, 'unlock_key_invalid');
  const recoveryKey = privateKeyOf(raw);
  const recovery = keyring?.recovery ?? null;
  if (keyring === undefined || recovery === null || rawPublicKey(recoveryKey).toString('base64') !== recovery.publicKey) {
    const which = recovery === null ? 'the snapshot\'s cluster had no recovery key when it was taken' : `its recovery key is ${recovery.id}, made ${new Date(recovery.createdAt).toISOString()}`;
    throw new CliFailure(`that recovery key is not the one of ${file} (${which}); nothing was written`, exitCodes.failed, 'unlock_key_invalid');
  }
  const keys = keyring.keys.flatMap((k) => (k.recovery === null || k.recovery.keyId !== recovery.id ? [] : [{ id: k.id, privateKey: privateKeyOf(unwrapDataKey(k.recovery, `cluster key ${k.id}`, recoveryKey)) }]));
  const opened = new Set(keys.map((k) => k.id));
  const unreadable = sealed.filter((r) => !opened.has(r.sealed.key.keyId)).map((r) => r.name);
  // Autolock's unlock key is the old cluster's: the new one starts without autolock.
  const pending = keyring.autolock !== null ? { keyring: { ...keyring, autolock: null }, replace: true } : undefined;
  return { readable: total - unreadable.length, unreadable, keys, pending, fresh: null };
}

/** Writes the opened keys, or new ones, into the new node's data directory; answers a new recovery key's text, if one was made. */
export function writeRestoredKeys(dataDir: string, plan: SecretsRestorePlan): string | undefined {
  const holder = new ClusterKeyFiles(dataDir);
  for (const k of plan.keys) holder.add(k.id, k.privateKey);
  if (plan.fresh !== null) {
    const { keyring, recoveryKey } = foundingKeyring(holder, plan.fresh);
    writePendingKeyring(dataDir, { keyring, replace: true });
    return recoveryKey;
  }
  if (plan.pending !== undefined) writePendingKeyring(dataDir, plan.pending);
  return undefined;
}

export function restoredSecretsText(plan: SecretsRestorePlan, recoveryKey: string | undefined): string {
  const lines: string[] = [];
  if (plan.keys.length > 0) lines.push(`opened ${plan.keys.length} cluster key(s) with the recovery key: ${plan.readable} secret(s) readable`);
  if (plan.unreadable.length > 0) lines.push(`${plan.unreadable.length} secret(s) cannot be read in the new cluster (set each again with shoal secret set NAME --from-file FILE): ${plan.unreadable.join(', ')}`);
  if (recoveryKey !== undefined) {
    lines.push(`the new cluster has cluster keys of its own, and this recovery key (shown this once; keep it offline, apart from your backups):\n\n  ${recoveryKey}\n`);
  }
  return lines.join('\n');
}
