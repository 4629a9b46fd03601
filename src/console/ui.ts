// The pieces every view shares: htm bound to Preact, polling, and the confirmation dialog that
// every action moving work or leadership goes through.

import { html } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

export { html };

export interface Polled<T> {
  data: T | undefined;
  error: ApiError | undefined;
  refresh: () => void;
}

/**
 * Calls `load` now, every `everyMs` and on refresh(); keeps the last good answer through an
 * error. `everyMs` null pauses it (nothing is asked while the page waits for a sign-in).
 */
export function usePoll<T>(load: () => Promise<T>, everyMs: number | null, deps: unknown[] = []): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [tick, setTick] = useState(0);
  const live = useRef(true);
  useEffect(() => {
    if (everyMs === null) return undefined;
    live.current = true;
    const run = () => load().then((d) => { if (live.current) { setData(d); setError(undefined); } })
      .catch((e: unknown) => { if (live.current) setError(e instanceof ApiError ? e : new ApiError(0, 'internal', String(e))); });
    void run();
    const timer = setInterval(run, everyMs);
    return () => { live.current = false; clearInterval(timer); };
  }, [...deps, everyMs, tick]);
  return { data, error, refresh: () => setTick((t) => t + 1) };
}

export function ErrorLine({ error }: { error: ApiError | undefined }) {
  if (error === undefined) return null;
  return html`<p class="error" role="alert"><code>${error.code}</code> ${error.message}</p>`;
}

export interface Confirmation {
  title: string;
  body: string;
  confirm: string;
  run: () => Promise<unknown>;
}

/** A modal <dialog>: Escape or Cancel closes it; the action runs only on the confirm button. */
export function ConfirmDialog({ ask, done }: { ask: Confirmation | null; done: (message: string | null) => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    const d = ref.current;
    if (d === null) return;
    if (ask !== null && !d.open) d.showModal();
    if (ask === null && d.open) d.close();
  }, [ask]);
  if (ask === null) return html`<dialog ref=${ref}></dialog>`;
  const go = async () => {
    setBusy(true);
    try {
      await ask.run();
      done(null);
    } catch (e) {
      done(e instanceof ApiError ? `${e.code}: ${e.message}` : String(e));
    } finally {
      setBusy(false);
    }
  };
  return html`<dialog ref=${ref} aria-labelledby="confirm-title" onCancel=${() => done(null)}>
    <h2 id="confirm-title">${ask.title}</h2>
    <p>${ask.body}</p>
    <div class="actions">
      <button type="button" onClick=${() => done(null)}>Cancel</button>
      <button type="button" class="danger" data-confirm disabled=${busy} onClick=${go}>${ask.confirm}</button>
    </div>
  </dialog>`;
}

export function Badge({ kind, text }: { kind: string; text: string }) {
  return html`<span class=${`badge ${kind}`}>${text}</span>`;
}
