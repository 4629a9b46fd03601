// Events: the cluster's latest events as a live list (the /v1/events stream, read with fetch so
// the credential goes along), filtered by type, service and node as they arrive.

import { useEffect, useState } from 'preact/hooks';
import type { ClusterEvent } from '../../node/events/event-log.ts';
import { ApiError, api, stream } from '../api.ts';
import { Badge, ErrorLine, html, usePoll } from '../ui.ts';

const shownMax = 300;

/** Whether an event concerns the filters' service and node (empty filters match everything). */
export function matches(e: ClusterEvent, f: { type: string; service: string; node: string }): boolean {
  const text = JSON.stringify(e.details);
  if (f.type !== '' && !e.type.startsWith(f.type)) return false;
  if (f.service !== '' && !(e.subject.includes(f.service) || text.includes(`"${f.service}"`))) return false;
  if (f.node !== '' && !(e.nodeName === f.node || e.subject.includes(f.node) || text.includes(`"${f.node}"`))) return false;
  return true;
}

/** Keeps the stream open, reconnecting after the last cursor seen; `onChange` fires on every event. */
function useEvents(onChange: () => void): { events: ClusterEvent[]; error: ApiError | undefined } {
  const [events, setEvents] = useState<ClusterEvent[]>([]);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  useEffect(() => {
    const abort = new AbortController();
    let cursor: string | undefined;
    const run = async () => {
      while (!abort.signal.aborted) {
        try {
          await stream('events', cursor !== undefined ? { after: cursor } : {}, (m) => {
            if (m.id !== undefined) cursor = m.id;
            if (m.event === 'sync') return;
            const e = JSON.parse(m.data) as ClusterEvent;
            setEvents((old) => [e, ...old].slice(0, shownMax));
            setError(undefined);
            onChange();
          }, abort.signal);
        } catch (e) {
          if (abort.signal.aborted) return;
          setError(e instanceof ApiError ? e : new ApiError(0, 'unreachable', `the event stream broke: ${String(e)}`));
        }
        await new Promise((r) => setTimeout(r, 1000));
      }
    };
    void run();
    return () => abort.abort();
  }, []);
  return { events, error };
}

/** The latest drill reports (`shoal drill`), newest first: what each fault cost. */
function DrillReports() {
  const { data, error } = usePoll(() => api.drills(), 10_000);
  if (data === undefined || data.items.length === 0) return html`<${ErrorLine} error=${error} />`;
  return html`<h2>Drills</h2>
    <div class="scroll"><table data-testid="drills">
      <thead><tr><th scope="col">When</th><th scope="col">Drill</th><th scope="col">Target</th><th scope="col">Result</th><th scope="col">New leader</th><th scope="col">Longest write gap</th><th scope="col">Writes acked / lost</th><th scope="col">Reads backwards</th><th scope="col">Services back</th></tr></thead>
      <tbody>${data.items.map((d) => html`<tr key=${d.id}>
        <td><time datetime=${d.startedAt}>${new Date(d.startedAt).toLocaleString()}</time></td><th scope="row">${d.drill}</th><td>${d.target.name}</td>
        <td><${Badge} kind=${d.ok ? 'healthy' : 'failed'} text=${d.ok ? 'passed' : 'failed'} /></td>
        <td>${d.newLeaderMs === null ? 'no election' : `${d.newLeaderMs} ms`}</td><td>${d.longestWriteGapMs} ms</td>
        <td>${d.writes.acknowledged} / ${d.writes.lost}</td><td>${d.reads.backwards}</td><td>${d.servicesBackMs === null ? 'not in time' : `${d.servicesBackMs} ms`}</td>
      </tr>`)}</tbody>
    </table></div>`;
}

export function EventsView({ onChange }: { onChange: () => void }) {
  const { events, error } = useEvents(onChange);
  const [f, setF] = useState({ type: '', service: '', node: '' });
  const field = (k: 'type' | 'service' | 'node', label: string) => html`<label>${label}
    <input type="search" value=${f[k]} onInput=${(e: Event) => setF({ ...f, [k]: (e.target as HTMLInputElement).value })} /></label>`;
  const shown = events.filter((e) => matches(e, f));
  return html`<section aria-labelledby="events-h">
    <h1 id="events-h">Events</h1>
    <${ErrorLine} error=${error} />
    <form class="filters" role="search" onSubmit=${(e: Event) => e.preventDefault()}>${field('type', 'Type')} ${field('service', 'Service')} ${field('node', 'Node')}</form>
    <ol class="events" aria-live="polite" data-testid="events">${shown.map((e) => html`<li key=${e.cursor} data-type=${e.type}>
      <time datetime=${e.time}>${new Date(e.time).toLocaleTimeString()}</time> <strong>${e.type}</strong> ${e.subject}
      <span class="muted">on ${e.nodeName}, term ${e.term}</span>
    </li>`)}</ol>
    ${shown.length === 0 ? html`<p>No events yet${events.length > 0 ? ' match the filters' : ''}.</p>` : null}
    <${DrillReports} />
  </section>`;
}
