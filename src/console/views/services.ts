// Services: desired and running replicas (and the ones serving during an update, or on an
// unreachable node), update progress and rollbacks; a service's tasks with their node and state,
// and the log of a task.

import { useState } from 'preact/hooks';
import type { ServiceView } from '../../api/control-views.ts';
import { api } from '../api.ts';
import { replicasText } from '../format.ts';
import { Badge, ErrorLine, html, usePoll } from '../ui.ts';

function updateText(s: ServiceView): string {
  const u = s.record.updateStatus;
  return u.state === 'none' ? '—' : `${u.state}${u.message !== null ? `: ${u.message}` : ''}`;
}

function TaskLog({ id }: { id: string }) {
  const { data, error } = usePoll(() => api.taskLogs(id), 3000, [id]);
  return html`<${ErrorLine} error=${error} /><pre class="log" data-testid="task-log">${data ?? 'Loading…'}</pre>`;
}

function ServiceDetail({ name, tick }: { name: string; tick: number }) {
  const { data, error } = usePoll(() => api.service(name), 2000, [name, tick]);
  const [logOf, setLogOf] = useState<string | null>(null);
  if (data === undefined) return html`<${ErrorLine} error=${error} />`;
  return html`<div class="detail">
    <h2>Tasks of ${name}</h2>
    <${ErrorLine} error=${error} />
    <div class="scroll"><table>
      <thead><tr><th scope="col">Slot</th><th scope="col">Node</th><th scope="col">Desired</th><th scope="col">Observed</th><th scope="col">Health</th><th scope="col">Spec version</th><th scope="col"></th></tr></thead>
      <tbody>${data.tasks.map((t) => html`<tr key=${t.id} data-task=${t.id} data-task-node=${t.nodeName ?? ''} data-task-state=${t.observed}>
        <th scope="row">${t.slot}</th><td>${t.nodeName ?? 'unassigned'}</td><td>${t.desired}</td>
        <td><${Badge} kind=${t.observed} text=${t.observed} /></td><td>${t.health ?? '—'}</td><td>${t.record.specVersion}</td>
        <td><button type="button" onClick=${() => setLogOf(logOf === t.id ? null : t.id)}>${logOf === t.id ? 'Hide log' : 'Log'}</button></td>
      </tr>`)}</tbody>
    </table></div>
    ${logOf !== null ? html`<${TaskLog} id=${logOf} />` : null}
  </div>`;
}

export function ServicesView({ tick }: { tick: number }) {
  const { data, error } = usePoll(() => api.services(), 2000, [tick]);
  const [open, setOpen] = useState<string | null>(null);
  return html`<section aria-labelledby="services-h">
    <h1 id="services-h">Services</h1>
    <${ErrorLine} error=${error} />
    ${data === undefined ? html`<p>Loading…</p>` : data.items.length === 0 ? html`<p>No services yet: <code>shoal apply -f service.yaml</code>.</p>` : html`<div class="scroll"><table>
      <thead><tr><th scope="col">Name</th><th scope="col">Image</th><th scope="col">Running / desired</th><th scope="col">Pending</th><th scope="col">Update</th><th scope="col">Spec version</th></tr></thead>
      <tbody>${data.items.map((s) => html`<tr key=${s.name} data-service=${s.name}>
        <th scope="row"><button type="button" class="link" aria-expanded=${open === s.name} onClick=${() => setOpen(open === s.name ? null : s.name)}>${s.name}</button></th>
        <td><code>${s.record.spec.image}</code></td>
        <td data-replicas><${Badge} kind=${s.status.converged ? 'healthy' : s.status.unreachable > 0 ? 'unreachable' : 'lagging'} text=${replicasText(s.status)} /></td>
        <td>${s.status.pending}${s.status.pendingReasons.length > 0 ? ` (${s.status.pendingReasons.join('; ')})` : ''}</td>
        <td>${updateText(s)}</td><td>${s.record.specVersion}${s.record.previousSpecVersion !== null ? ` (rollback to ${s.record.previousSpecVersion})` : ''}</td>
      </tr>`)}</tbody>
    </table></div>`}
    ${open !== null ? html`<${ServiceDetail} name=${open} tick=${tick} />` : null}
  </section>`;
}
