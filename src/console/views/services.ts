// Services: desired and running replicas (and the ones serving during an update, or on an
// unreachable node), update progress and rollbacks; a service's tasks current first (one row per
// slot: src/api/task-order.ts, as `shoal service ps`), each slot's history folded under it, and
// the log of a task.

import { useEffect, useState } from 'preact/hooks';
import type { ServiceView, TaskItem } from '../../api/control-views.ts';
import { slotRows } from '../../api/task-order.ts';
import { api } from '../api.ts';
import { Chart, chartPollMs, formats, marksOf, spansOf, WindowPicker } from '../charts.ts';
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

/** The task's last message or exit code (its pending reason has its own column). */
function messageOf(t: TaskItem): string {
  const m = t.record.message ?? t.report?.message ?? null;
  return m ?? (t.record.exitCode !== null ? `exit ${t.record.exitCode}` : '');
}

function TaskRow({ t, slot, earlier, open, toggle, logOf, setLogOf }: {
  t: TaskItem; slot: string; earlier: number | null; open: boolean; toggle: () => void; logOf: string | null; setLogOf: (id: string | null) => void;
}) {
  const history = earlier === null;
  return html`<tr key=${t.id} class=${history ? 'earlier' : undefined} data-task=${t.id} data-task-node=${t.nodeName ?? ''} data-task-state=${t.observed} data-slot=${slot} data-current=${history ? undefined : 'true'}>
    <th scope="row">${history ? html`<span class="muted">↳</span>` : slot}</th>
    <td><code title=${t.id}>${t.id.slice(0, 12)}</code></td>
    <td>${t.nodeName ?? (t.nodeId === null ? 'unassigned' : t.nodeId)}</td>
    <td><${Badge} kind=${t.observed} text=${t.observed} />${t.desired !== 'running' && !history ? html` <span class="muted">(${t.desired})</span>` : null}</td>
    <td>${t.health ?? '—'}</td>
    <td class="wrap" data-message>${messageOf(t) || '—'}</td>
    <td class="wrap" data-pending>${t.observed === 'pending' ? t.record.pendingReason ?? 'waiting for a node' : '—'}</td>
    <td>${t.record.specVersion}</td>
    <td class="actions">${earlier !== null && earlier > 0 ? html`<button type="button" class="link" data-earlier aria-expanded=${open} onClick=${toggle}>${open ? 'Hide' : ''} ${earlier} earlier</button>` : null}
      <button type="button" onClick=${() => setLogOf(logOf === t.id ? null : t.id)}>${logOf === t.id ? 'Hide log' : 'Log'}</button></td>
  </tr>`;
}

/** Running tasks over time against those desired, updates shaded, new failures marked. */
function ServiceChart({ name }: { name: string }) {
  const [windowS, setWindowS] = useState(3600);
  const { data, error } = usePoll(() => api.serviceSeries(name, windowS), chartPollMs, [name, windowS]);
  if (data === undefined) return html`<${ErrorLine} error=${error} />`;
  return html`<${WindowPicker} id="service-window" value=${windowS} set=${setWindowS} />
    <div class="charts"><${Chart} id=${`running-${name}`} title="Running" times=${data.times} windowMs=${windowS * 1000} nowMs=${Date.now()} format=${formats.count} yMin=${1}
      lines=${[{ label: 'running', values: data.series.running, cls: 'line-b' }, { label: 'desired', values: data.series.desired, cls: 'line-a' }]}
      bands=${spansOf(data.times, data.series.updating)}
      marks=${marksOf(data.times, data.series.failures, (n) => (n === 1 ? 'a task failed' : `${n} tasks failed`))} /></div>
    <p class="muted">Shaded: a rolling update or rollback; dashed marks: tasks that failed. Sampled by this node, one per ${data.intervalMs / 1000} s.</p>`;
}

function ServiceDetail({ name, tick }: { name: string; tick: number }) {
  const { data, error } = usePoll(() => api.service(name), 2000, [name, tick]);
  const [logOf, setLogOf] = useState<string | null>(null);
  const [unfolded, setUnfolded] = useState<ReadonlySet<string>>(new Set());
  if (data === undefined) return html`<${ErrorLine} error=${error} />`;
  const rows = slotRows(data.tasks);
  const toggle = (slot: string) => () => setUnfolded((u) => {
    const next = new Set(u);
    if (!next.delete(slot)) next.add(slot);
    return next;
  });
  const body = rows.flatMap((r) => {
    const slot = String(r.slot);
    const open = unfolded.has(slot);
    const row = (t: TaskItem, earlier: number | null) => html`<${TaskRow} key=${t.id} t=${t} slot=${slot} earlier=${earlier} open=${open} toggle=${toggle(slot)} logOf=${logOf} setLogOf=${setLogOf} />`;
    return [...r.current.map((t, i) => row(t, i === 0 ? r.earlier.length : 0)), ...(open ? r.earlier.map((t) => row(t, null)) : [])];
  });
  return html`<div class="detail">
    <h2>${name} over time</h2>
    <${ServiceChart} name=${name} />
    <h2>Tasks of ${name}</h2>
    <p class="muted">One row per slot, the task meant to run there first; a slot's earlier tasks unfold under it.</p>
    <${ErrorLine} error=${error} />
    <div class="scroll"><table data-testid="tasks">
      <thead><tr><th scope="col">Slot</th><th scope="col">Task</th><th scope="col">Node</th><th scope="col">State</th><th scope="col">Health</th><th scope="col">Message</th><th scope="col">Pending reason</th><th scope="col">Spec version</th><th scope="col"></th></tr></thead>
      <tbody>${body}</tbody>
    </table></div>
    ${logOf !== null ? html`<${TaskLog} id=${logOf} />` : null}
  </div>`;
}

export function ServicesView({ tick, focus = null }: { tick: number; focus?: string | null }) {
  const { data, error } = usePoll(() => api.services(), 2000, [tick]);
  const [open, setOpen] = useState<string | null>(focus);
  // A summary link (#services/NAME) opens that service.
  useEffect(() => {
    if (focus !== null) setOpen(focus);
  }, [focus]);
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
