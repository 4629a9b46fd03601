// The first voter token of a cluster founded by `shoal init`. Init prints the join command at
// once, but the token's record belongs in the replicated store, which exists only once the node
// runs: init leaves the record (the secret's hash, never the secret) in DATA/tls/founding-token.json
// and the node writes it when it first leads, then deletes the file.

import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { encodeCommand } from '../../fsm/index.ts';
import type { CommandResult, JsonObject } from '../../fsm/types.ts';
import type { Logger } from '../log.ts';
import type { Proposer } from '../ports/proposer.ts';
import type { TermSource } from '../ports/term-source.ts';
import { tokenRecordSchema, tokensCollection, type TokenRecord } from './tokens.ts';

const retryMs = 250;

export const foundingTokenFile = (dataDir: string): string => path.join(dataDir, 'tls', 'founding-token.json');

export function saveFoundingToken(dataDir: string, record: TokenRecord): void {
  writeFileSync(foundingTokenFile(dataDir), `${JSON.stringify(record)}\n`, { mode: 0o600 });
}

/**
 * The founding token while its record is not yet in the store. A join that comes with it in that
 * window (right after `shoal init`, before the node has led long enough to write the record)
 * waits for `written` rather than being refused as an unknown token.
 */
export interface FoundingToken {
  /** The id of the token not yet written; undefined once written or given up. */
  pendingId(): string | undefined;
  /** Settles true when the record is written (or there was none to write), false when given up or the node stops. */
  readonly written: Promise<boolean>;
  cancel(): void;
}

/** Writes the founding token once this node leads; `cancel` stops trying (the node stops). */
export function mintFoundingToken(node: Proposer & TermSource, dataDir: string, log: Logger): FoundingToken {
  const file = foundingTokenFile(dataDir);
  if (!existsSync(file)) return { pendingId: () => undefined, written: Promise.resolve(true), cancel() {} };
  let pending: string | undefined;
  try {
    pending = tokenRecordSchema.parse(JSON.parse(readFileSync(file, 'utf8'))).id;
  } catch {
    // Unreadable: the attempt below says so in the log; no join waits for it.
  }
  let settle = (_ok: boolean): void => {};
  const written = new Promise<boolean>((resolve) => { settle = resolve; });
  const done = (ok = false): void => { pending = undefined; settle(ok); };
  let timer: NodeJS.Timeout | undefined;
  let cancelled = false;
  const attempt = async (): Promise<void> => {
    if (cancelled) return done();
    if (node.isLeader && node.appliedTerm === node.currentTerm) {
      try {
        const record = tokenRecordSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
        const cmd = { op: 'put' as const, collection: tokensCollection, id: record.id, doc: record as unknown as JsonObject, expect: { absent: true as const } };
        const { result } = await node.propose(encodeCommand({ cmd, ts: Date.now(), principal: 'shoal-init' }));
        const r = result as CommandResult;
        if (r.ok || r.error.code === 'already_exists') {
          unlinkSync(file);
          log.info(`the join token shoal init printed (id ${record.id}) is now valid until ${new Date(record.expiresAtMs).toISOString()}`);
          return done(true);
        }
        log.warn(`could not write the join token shoal init printed: ${r.error.message}`);
        return done();
      } catch (err) {
        log.warn(`writing the join token shoal init printed failed (${(err as Error).message}); retrying`);
      }
    }
    if (!cancelled) timer = setTimeout(() => { void attempt(); }, retryMs);
  };
  void attempt();
  return { pendingId: () => pending, written, cancel() { cancelled = true; clearTimeout(timer); done(); } };
}
