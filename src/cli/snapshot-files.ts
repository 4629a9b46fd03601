// shoal snapshot ls / inspect: the snapshot files on this machine, those the node writes on a
// schedule (config `snapshot`, src/node/recovery/backups.ts) and those `shoal snapshot save` downloaded.
// Local commands: they read files, never a node.

import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../server/config.ts';
import { backupFilePattern, listBackups } from '../node/recovery/backups.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure } from './client.ts';
import { table } from './cluster-view.ts';
import { DocumentStore } from '../../fsm/index.ts';
import { isShoalError } from '../errors.ts';
import { decodeSnapshotFile, type SnapshotFileBody } from '../node/recovery/snapshot-file.ts';

export const snapshotLsHelp = `Usage: shoal snapshot ls (--data DIR | --dir DIR) [--json]

Lists the scheduled snapshot files of a node, oldest first: with --data, those in the directory
its config names (snapshot.dir, default DIR/backups); with --dir, those in DIR. Each with its
cluster id, index, time written and size. Read one whole with 'shoal snapshot inspect FILE';
start a new cluster from one with 'shoal snapshot restore FILE'.

Options:
  --data DIR   a node's data directory (its shoal.yaml says where the files go)
  --dir DIR    a directory of snapshot files
  --json       print [{file, clusterId, index, time, bytes}]
  -h, --help   show this help

Exit codes: 0 ok (also with no files); 2 usage error (neither or both of --data and --dir, a
config that cannot be read).`;

export const snapshotInspectHelp = `Usage: shoal snapshot inspect FILE [--json]

Reads a snapshot file whole and checks it (checksum, layout, the document store inside), then
prints what it holds: cluster id, index, term, members and the number of documents.

Options:
  --json       print {file, bytes, clusterId, index, term, members, documents}
  -h, --help   show this help

Exit codes: 0 the file is sound; 1 it is missing or damaged (the message says which); 2 usage error.`;

const flags = { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } } as const;

export async function lsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...flags, data: { type: 'string' }, dir: { type: 'string' } }, snapshotLsHelp);
  if (values.help) { console.log(snapshotLsHelp); return exitCodes.ok; }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if ((values.data === undefined) === (values.dir === undefined)) throw new UsageError('give either --data DIR or --dir DIR');
  let dir: string;
  if (values.dir !== undefined) dir = path.resolve(values.dir);
  else {
    const dataDir = path.resolve(values.data ?? '.');
    const config = loadConfig(path.join(dataDir, 'shoal.yaml'));
    dir = config.snapshot.dir !== undefined ? path.resolve(config.dataDir, config.snapshot.dir) : path.join(config.dataDir, 'backups');
  }
  const rows = listBackups(dir).map((name) => {
    const m = backupFilePattern.exec(name);
    const t = m?.[3] ?? '';
    return {
      file: path.join(dir, name), clusterId: m?.[1] ?? '', index: Number(m?.[2] ?? 0),
      time: `${t.slice(0, 4)}-${t.slice(4, 6)}-${t.slice(6, 8)}T${t.slice(9, 11)}:${t.slice(11, 13)}:${t.slice(13, 15)}Z`,
      bytes: statSync(path.join(dir, name)).size,
    };
  });
  if (values.json) console.log(JSON.stringify(rows));
  else if (rows.length === 0) console.log(`no snapshot files in ${dir} (config snapshot.intervalMs sets how often a node writes one)`);
  else table(['FILE', 'CLUSTER', 'INDEX', 'TIME', 'BYTES'], rows.map((r) => [path.basename(r.file), r.clusterId, String(r.index), r.time, String(r.bytes)]));
  return exitCodes.ok;
}

export async function inspectCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, flags, snapshotInspectHelp);
  if (values.help) { console.log(snapshotInspectHelp); return exitCodes.ok; }
  const [file, ...extra] = positionals;
  if (file === undefined || extra.length > 0) throw new UsageError('expected one FILE');
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new CliFailure(`cannot read ${file}: ${(err as Error).message}`, exitCodes.failed, 'not_found');
  }
  const { body, documents } = verifySnapshot(bytes, file);
  const out = { file: path.resolve(file), bytes: bytes.length, clusterId: body.clusterId, index: body.index, term: body.term, members: body.members, documents };
  if (values.json) console.log(JSON.stringify(out));
  else {
    console.log(`${out.file}: sound, ${out.bytes} bytes`);
    console.log(`cluster ${out.clusterId}   index ${out.index}   term ${out.term}   documents ${documents}`);
    table(['MEMBER', 'ID', 'API', 'PEER'], body.members.map((m) => [m.name, m.id, m.apiAddress, m.peerAddress]));
  }
  return exitCodes.ok;
}

/** Checks a snapshot file's bytes all the way down: checksum, layout, and the store inside. */
export function verifySnapshot(bytes: Uint8Array, source: string): { body: SnapshotFileBody; documents: number } {
  let body: SnapshotFileBody;
  try {
    body = decodeSnapshotFile(bytes, source);
  } catch (err) {
    if (isShoalError(err)) throw new CliFailure(err.message, exitCodes.failed, 'snapshot_damaged');
    throw err;
  }
  const store = new DocumentStore();
  try {
    store.restore(body.app);
  } catch (err) {
    throw new CliFailure(`${source} holds a document store this version cannot read: ${(err as Error).message}`, exitCodes.failed, 'snapshot_damaged');
  }
  return { body, documents: store.stats().documents };
}
