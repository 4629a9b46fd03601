// `--watch` on the control plane's lists (service ls|ps, node ls, task ls): print the list, then
// print it again whenever the records it is made of change. The changes come from GET /v1/watch
// on the reserved collections the list reads (one stream each, resumed after the listing's
// revision, so no change between the listing and the watch is missed; watch-stream.ts reconnects
// and fails over). Changes are coalesced: a burst of them (a rolling update writes many records)
// prints the list once, at most every listEveryMs.

import { exitCodes } from './args.ts';
import { ApiError, CliFailure, isClientFailure, reportFailure } from './client.ts';
import { followWatch, untilInterrupted, WatchLostError } from './watch-stream.ts';

/** The shortest time between two printings of a watched list. */
const listEveryMs = 250;

export interface ListWatch {
  addr: string;
  /** The reserved collections the list is made of (shoal.services, shoal.tasks, ...). */
  collections: readonly string[];
  command: string;
  json: boolean;
  /** Reads the list; returns what to print and the store revision it was read at. */
  render: () => Promise<Rendered>;
}

export interface Rendered {
  text: string;
  rev: number;
  /** What identifies the content (text without the revision, for JSON); default: the text. */
  key?: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Prints the list once (without --watch). */
export async function printList(render: () => Promise<Rendered>): Promise<number> {
  console.log((await render()).text);
  return exitCodes.ok;
}

/** Prints the list, then again on every change that changes it, until Ctrl-C (exit 0). */
export async function watchList(w: ListWatch): Promise<number> {
  const stop = untilInterrupted();
  let last: string | undefined;
  const print = async (): Promise<number> => {
    const r = await w.render();
    // Records change without changing the list (a task's report, a leader's bookkeeping): print only news.
    const key = r.key ?? r.text;
    if (key !== last) console.log(last === undefined || w.json ? r.text : `\n${r.text}`);
    last = key;
    return r.rev;
  };
  try {
    let after = await print();
    if (!w.json) console.error(`watching for changes after rev ${after} (Ctrl-C to stop)`);
    while (!stop.signal.aborted) {
      const outcome = await followAll(w, after, stop.signal, print);
      if (outcome === 'stopped') break;
      // The cluster no longer keeps the events after `after`: list again and watch from there.
      after = await print();
    }
    return exitCodes.ok;
  } catch (err) {
    if (err instanceof WatchLostError) return reportFailure(w.command, new CliFailure(err.message, exitCodes.unavailable, 'watch_lost'), w.json);
    if (isClientFailure(err)) return reportFailure(w.command, err, w.json);
    throw err;
  } finally {
    stop.dispose();
  }
}

/** One stream per collection until Ctrl-C ('stopped') or a cursor too old ('expired'). */
async function followAll(w: ListWatch, after: number, stop: AbortSignal, print: () => Promise<number>): Promise<'stopped' | 'expired'> {
  const ctrl = new AbortController();
  const onStop = (): void => ctrl.abort();
  stop.addEventListener('abort', onStop, { once: true });
  const reprint = coalesced(w, print);
  try {
    await Promise.all(w.collections.map((collection) => followWatch({
      addr: w.addr, collection, after, signal: ctrl.signal, onEvent: reprint,
      onNotice: (m) => { if (!w.json) console.error(`shoal ${w.command}: ${m}`); },
    }).catch((err: unknown) => {
      ctrl.abort();
      throw err;
    })));
    return 'stopped';
  } catch (err) {
    if (stop.aborted) return 'stopped';
    if (err instanceof ApiError && err.code === 'cursor_expired') return 'expired';
    throw err;
  } finally {
    stop.removeEventListener('abort', onStop);
    ctrl.abort();
  }
}

/** A function that prints the list again soon, once for any number of calls meanwhile. */
function coalesced(w: ListWatch, print: () => Promise<number>): () => void {
  let dirty = false;
  let running = false;
  return () => {
    dirty = true;
    if (running) return;
    running = true;
    void (async () => {
      while (dirty) {
        dirty = false;
        await sleep(listEveryMs);
        try {
          await print();
        } catch (err) {
          // The next change prints it again; say why this one did not.
          if (!w.json) console.error(`shoal ${w.command}: could not list again: ${(err as Error).message}`);
        }
      }
      running = false;
    })();
  };
}
