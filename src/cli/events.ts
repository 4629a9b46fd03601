// shoal events: the cluster's own events (leader elected, member added, member unreachable, ...),
// as `docker events` and `nomad operator api /v1/event/stream` show theirs.

import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure, isClientFailure, reportFailure, resolveAddr } from './client.ts';
import { commonFlags, help } from './doc-common.ts';
import { commonFlagsHelp } from './group.ts';
import { EventsLostError, readEvents, type EventView } from './events-stream.ts';
import { untilInterrupted } from './watch-stream.ts';

export const eventsHelp = `Usage: shoal events [--watch] [--type T]... [--local] [--after CURSOR] [--addr HOST:PORT] [--json]

Prints the cluster's events, oldest first, one line each: time, type, subject, details and the
node that recorded it. The cluster keeps its latest 1000 events (leader.elected, member.added,
member.removed, member.promoted, member.unreachable, member.back, feature_level.raised, and the
control plane's: node.registered, node.suspect/down/ready, node.drained/paused/activated,
service.created/updated/removed, service.rollout, task.failed); each
node also keeps its own (--local: leader.changed, member.unreachable/back as it saw them,
snapshot.taken, snapshot.installed, node.failed, node.recovered, and cluster events it could
not record). docs/monitoring.md lists every type.

Options:
  --watch            after the retained events, print new ones as they happen until Ctrl-C;
                     reconnects after the last event printed (to another member if its node dies)
  --type T           only events of type T and the types under it ("member" is member.added,
                     member.removed, ...); repeat it or separate types with commas
  --local            the events of the node at --addr (its own view), not the cluster's
  --after CURSOR     only events after this cursor (each event's "cursor" in --json)
${commonFlagsHelp}

With --json, one JSON object per line: {cursor, scope, type, subject, time, node, nodeName, term,
details}.
Exit codes: 0 printed (with --watch: stopped with Ctrl-C); 1 the request was refused; 2 usage
error; 3 no node answered (with --watch: for 60 s; the message says the cursor to resume from).`;

const typePattern = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;

function typesFlag(values: string[] | undefined): string[] {
  const types = (values ?? []).flatMap((v) => v.split(',')).map((t) => t.trim()).filter((t) => t !== '');
  for (const t of types) if (!typePattern.test(t)) throw new UsageError(`--type: '${t}' is not an event type (dotted lower-case words, e.g. member or member.added)`);
  return types;
}

function cursorFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new UsageError(`--after must be a cursor (a whole number, e.g. 42), got '${value}'`);
  return n;
}

/** One line for a person: "TIME  TYPE  SUBJECT  key=value ...  (by NODE)". */
export function formatEventLine(ev: EventView): string {
  const details = Object.entries(ev.details).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
  return `${ev.time}  ${ev.type.padEnd(20)} ${ev.subject}${details === '' ? '' : `  ${details}`}  (by ${ev.nodeName}, term ${ev.term})`;
}

export async function eventsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, watch: { type: 'boolean', default: false }, type: { type: 'string', multiple: true },
    local: { type: 'boolean', default: false }, after: { type: 'string' },
  }, eventsHelp);
  if (values.help) return help(eventsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const types = typesFlag(values.type);
  const after = cursorFlag(values.after);
  const addr = resolveAddr(values.addr);
  const stop = untilInterrupted();
  let printed = 0;
  try {
    await readEvents({
      addr, types, local: values.local, follow: values.watch, signal: stop.signal, ...(after !== undefined ? { after } : {}),
      onEvent: (ev) => {
        printed++;
        console.log(values.json ? JSON.stringify(ev) : formatEventLine(ev));
      },
      onNotice: (m) => console.error(`shoal events: ${m}`),
    });
    if (!values.watch && !values.json && printed === 0) console.error(`no ${values.local ? 'local ' : ''}events${types.length > 0 ? ` of type ${types.join(', ')}` : ''}${after !== undefined ? ` after cursor ${after}` : ''}`);
    return exitCodes.ok;
  } catch (err) {
    if (err instanceof EventsLostError) {
      const resume = `shoal events --watch${values.local ? ' --local' : ''}${types.length > 0 ? ` --type ${types.join(',')}` : ''}${err.after !== undefined ? ` --after ${err.after}` : ''} --addr HOST:PORT`;
      return reportFailure('events', new CliFailure(`${err.message}\n  when a node is back, resume with: ${resume}`, exitCodes.unavailable, 'events_lost'), values.json);
    }
    if (isClientFailure(err)) return reportFailure('events', err, values.json);
    throw err;
  } finally {
    stop.dispose();
  }
}
