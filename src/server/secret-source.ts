// Where this node's agent gets a secret's value for a task (the executor's SecretDelivery.read;
// docs/security.md, "Secrets at rest"). A record written in the clear (below feature level 6) is
// read as it is. A sealed one needs its data key: a voter that holds the cluster key unwraps it
// here; any other node (a learner, a voter that has not fetched the key yet) asks the voters for
// that one data key, for that one task, over mTLS (POST /v1/keyring/data-key), and gets it sealed
// to its own certificate. An autolocked node decrypts nothing until it is unlocked: its tasks
// wait with that reason. The value is checked against the record's digest before it is handed on.

import { z } from 'zod';
import type { DocumentStore } from '../../fsm/index.ts';
import type { PeerHttp } from '../api/peer-http.ts';
import type { Tls } from '../base/tls-material.ts';
import type { SecretRead } from '../executor/secret-delivery.ts';
import type { Logger } from '../log.ts';
import type { ClusterKeyHolder } from '../ports/cluster-keys.ts';
import { openSecretValue, unwrapDataKey } from '../resources/secret-crypto.ts';
import { isSealed, plainSecretBytes, secretDigest, secretInStore, type SealedSecretRecord } from '../resources/secrets.ts';
import { addressesLeaderFirst } from '../security/node-client.ts';
import { openWithKey, sealedBoxSchema } from '../security/sealed-box.ts';

const answerSchema = z.object({ sealed: sealedBoxSchema, version: z.number().int(), keyId: z.string() }).strict();
const errorSchema = z.object({ code: z.string(), message: z.string() }).loose();
export const dataKeyCallTimeoutMs = 5_000;

export interface SecretSourceOptions {
  store: DocumentStore;
  keys: ClusterKeyHolder;
  nodeId: string;
  /** How to ask the voters for a data key; absent, only keys held here open secrets (a node built for tests). */
  remote?: { tls: Tls; peer: PeerHttp };
  members: () => { list: ReadonlyArray<{ id: string; apiAddress: string }>; leader: string };
  /** The voters now (only they may hold cluster keys). */
  voters: () => readonly string[];
  log: Logger;
}

type KeyAnswer = { ok: true; dataKey: Buffer } | { ok: false; message: string };

export class SecretSource {
  constructor(private readonly o: SecretSourceOptions) {}

  async read(name: string, taskId: string): Promise<SecretRead> {
    const record = secretInStore(this.o.store, name);
    if (record === undefined) {
      return { ok: false, wait: false, message: `no secret named ${name} in the store; create it (shoal secret create ${name} --from-file FILE) and the task's replacement will start` };
    }
    if (!isSealed(record)) return { ok: true, bytes: plainSecretBytes(record) };
    if (this.o.keys.locked) {
      return { ok: false, wait: true, message: `this node is autolocked and cannot decrypt secret ${name} until it is unlocked (shoal unlock --addr THIS_NODE)` };
    }
    const key = await this.dataKey(record, taskId);
    if (!key.ok) return { ok: false, wait: true, message: `cannot decrypt secret ${name} yet: ${key.message}` };
    try {
      const bytes = openSecretValue(name, record.sealed, key.dataKey);
      if (secretDigest(bytes) !== record.digest) return { ok: false, wait: true, message: `secret ${name} decrypts to a value whose digest is not the record's; waiting for a consistent record` };
      return { ok: true, bytes };
    } catch {
      return { ok: false, wait: true, message: `secret ${name}'s data key does not open its value (version ${record.version}); waiting for a consistent record` };
    } finally {
      key.dataKey.fill(0);
    }
  }

  private async dataKey(record: SealedSecretRecord, taskId: string): Promise<KeyAnswer> {
    const own = this.o.keys.privateKey(record.sealed.key.keyId);
    if (own !== undefined) return { ok: true, dataKey: unwrapDataKey(record.sealed.key, record.name, own) };
    const remote = this.o.remote;
    if (remote === undefined) return { ok: false, message: `this node does not hold cluster key ${record.sealed.key.keyId}` };
    const { list, leader } = this.o.members();
    const voters = new Set(this.o.voters());
    const asked = addressesLeaderFirst(list.filter((m) => voters.has(m.id)), leader, this.o.nodeId);
    if (asked.length === 0) return { ok: false, message: `this node does not hold cluster key ${record.sealed.key.keyId} and there is no other voter to ask` };
    const problems: string[] = [];
    for (const addr of asked) {
      try {
        return { ok: true, dataKey: await this.ask(remote, addr, record, taskId) };
      } catch (err) {
        problems.push(`${addr}: ${(err as Error).message}`);
      }
    }
    return { ok: false, message: `no voter gave its data key (${problems.join('; ')})` };
  }

  private async ask(remote: { tls: Tls; peer: PeerHttp }, addr: string, record: SealedSecretRecord, taskId: string): Promise<Buffer> {
    const body = { nodeId: this.o.nodeId, certPem: remote.tls.certPem, taskId, secret: record.name };
    const res = await remote.peer.fetch(addr, '/v1/keyring/data-key', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(dataKeyCallTimeoutMs),
    });
    const raw: unknown = await res.json().catch(() => undefined);
    if (!res.ok) {
      const e = errorSchema.safeParse(raw);
      throw new Error(e.success ? `${e.data.code}: ${e.data.message}` : `answered ${res.status}`);
    }
    const answer = answerSchema.parse(raw);
    if (answer.keyId !== record.sealed.key.keyId || answer.version !== record.version) throw new Error(`it has version ${answer.version} of the secret, this node ${record.version}: not caught up yet`);
    return Buffer.from(openWithKey(remote.tls.keyPem, answer.sealed), 'base64');
  }
}
