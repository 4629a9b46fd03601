// Jobs: each job's schedule, next time, runs going on and its last finished run; a job's runs
// (newest first) with their state, attempts, node and message, and the log of a run's last
// attempt.

import { useState } from 'preact/hooks';
import type { JobRunView, JobView } from '../../api/jobs-routes.ts';
import { api } from '../api.ts';
import { Badge, ErrorLine, html, usePoll } from '../ui.ts';

const when = (ms: number | null): string => (ms === null ? '—' : new Date(ms).toISOString().replace('.000Z', 'Z').replace('T', ' '));

function lastText(r: JobRunView | null): string {
  return r === null ? '—' : `${r.state} ${when(r.finishedAt)}`;
}

function RunLog({ taskId }: { taskId: string }) {
  const { data, error } = usePoll(() => api.taskLogs(taskId), 3000, [taskId]);
  return html`<${ErrorLine} error=${error} /><pre class="log" data-testid="run-log">${data ?? 'Loading…'}</pre>`;
}

function JobDetail({ name, tick }: { name: string; tick: number }) {
  const { data, error } = usePoll(() => api.job(name), 2000, [name, tick]);
  const [logOf, setLogOf] = useState<string | null>(null);
  if (data === undefined) return html`<${ErrorLine} error=${error} />`;
  return html`<div class="detail">
    <h2>Runs of ${name}</h2>
    <${ErrorLine} error=${error} />
    ${data.runs.length === 0 ? html`<p>No runs yet.</p>` : html`<div class="scroll"><table>
      <thead><tr><th scope="col">Run</th><th scope="col">Cause</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Node</th><th scope="col">Exit</th><th scope="col">Message</th><th scope="col"></th></tr></thead>
      <tbody>${data.runs.map((r) => html`<tr key=${r.id} data-run=${r.id} data-run-state=${r.state}>
        <th scope="row">${r.id}</th><td>${r.cause}</td><td><${Badge} kind=${r.state} text=${r.state} /></td><td>${r.attempts}</td>
        <td>${r.nodeName ?? '—'}</td><td>${r.exitCode ?? '—'}</td><td>${r.message ?? ''}</td>
        <td>${r.taskId === null ? null : html`<button type="button" onClick=${() => setLogOf(logOf === r.taskId ? null : r.taskId)}>${logOf === r.taskId ? 'Hide log' : 'Log'}</button>`}</td>
      </tr>`)}</tbody>
    </table></div>`}
    ${logOf !== null ? html`<${RunLog} taskId=${logOf} />` : null}
  </div>`;
}

export function JobsView({ tick }: { tick: number }) {
  const { data, error } = usePoll(() => api.jobs(), 2000, [tick]);
  const [open, setOpen] = useState<string | null>(null);
  return html`<section aria-labelledby="jobs-h">
    <h1 id="jobs-h">Jobs</h1>
    <${ErrorLine} error=${error} />
    ${data === undefined ? html`<p>Loading…</p>` : data.items.length === 0 ? html`<p>No jobs. Create one with <code>shoal apply</code> and a <code>kind: Job</code> document.</p>` : html`<div class="scroll"><table>
      <thead><tr><th scope="col">Name</th><th scope="col">Schedule</th><th scope="col">Concurrency</th><th scope="col">Next (UTC)</th><th scope="col">Active</th><th scope="col">Last run</th><th scope="col"></th></tr></thead>
      <tbody>${data.items.map((j: JobView) => html`<tr key=${j.name} data-job=${j.name}>
        <th scope="row">${j.name}</th><td>${j.schedule ?? 'manual'}${j.suspended ? ' (suspended)' : ''}</td><td>${j.concurrency}</td>
        <td>${when(j.nextAt)}</td><td>${j.active}</td>
        <td>${j.lastFinished === null ? '—' : html`<${Badge} kind=${j.lastFinished.state} text=${lastText(j.lastFinished)} />`}</td>
        <td><button type="button" onClick=${() => setOpen(open === j.name ? null : j.name)}>${open === j.name ? 'Hide runs' : 'Runs'}</button></td>
      </tr>`)}</tbody>
    </table></div>`}
    ${open !== null ? html`<${JobDetail} name=${open} tick=${tick} />` : null}
  </section>`;
}
