// Small charts drawn by hand as SVG (no chart library: nothing to fetch, works offline): lines of
// a node's or a service's samples over a time window, vertical marks for events (a leader
// change, a failed task) and shaded bands for spans (a rolling update). Colours come from the
// style sheet's variables, so they follow the light or dark scheme. Each chart is a <figure> whose
// caption says the latest values in words; the raw values ride on the paths (data-values) so a
// test can read what is drawn.

import { html } from './ui.ts';

export interface ChartLine {
  label: string;
  values: ReadonlyArray<number | null>;
  /** A class of app.css: line-a, line-b, line-c. */
  cls: string;
}

export interface ChartProps {
  id: string;
  title: string;
  times: readonly number[];
  lines: readonly ChartLine[];
  /** Times of events drawn as vertical marks, with what they were. */
  marks?: ReadonlyArray<{ at: number; label: string }>;
  /** Spans drawn as shaded bands. */
  bands?: ReadonlyArray<{ from: number; to: number }>;
  /** The window the x axis spans, ending now. */
  windowMs: number;
  nowMs: number;
  format: (v: number) => string;
  /** The top of the y axis; by default the largest value (at least `yMin`). */
  yMax?: number;
  yMin?: number;
}

const width = 300;
const height = 80;

/** The path of a series: segments broken where a value is missing. */
export function pathOf(times: readonly number[], values: ReadonlyArray<number | null>, x: (t: number) => number, y: (v: number) => number): string {
  let d = '';
  let run = 0;
  // A lone point (its neighbours missing) is drawn as a dot: a zero-length line with round caps.
  const endRun = (): void => {
    if (run === 1) d += 'h0';
    run = 0;
  };
  for (let i = 0; i < times.length; i++) {
    const v = values[i];
    if (v === null || v === undefined) {
      endRun();
      continue;
    }
    d += `${run > 0 ? 'L' : 'M'}${x(times[i] as number).toFixed(1)},${y(v).toFixed(1)}`;
    run++;
  }
  endRun();
  return d;
}

/** Spans where `flags` is 1, as [from, to] times (to: the next sample's time, or the last one's). */
export function spansOf(times: readonly number[], flags: ReadonlyArray<number | null>): Array<{ from: number; to: number }> {
  const out: Array<{ from: number; to: number }> = [];
  let from: number | null = null;
  for (let i = 0; i < times.length; i++) {
    const on = (flags[i] ?? 0) > 0;
    if (on && from === null) from = times[i] as number;
    if (!on && from !== null) {
      out.push({ from, to: times[i] as number });
      from = null;
    }
  }
  if (from !== null) out.push({ from, to: times[times.length - 1] as number });
  return out;
}

/** Times where `counts` is above 0 (a leader change, a new failure in that interval). */
export function marksOf(times: readonly number[], counts: ReadonlyArray<number | null>, label: (n: number) => string): Array<{ at: number; label: string }> {
  return times.flatMap((t, i) => ((counts[i] ?? 0) > 0 ? [{ at: t, label: label(counts[i] as number) }] : []));
}

const lastKnown = (values: ReadonlyArray<number | null>): number | null => [...values].reverse().find((v) => v !== null) ?? null;

export function Chart(p: ChartProps) {
  const t0 = p.nowMs - p.windowMs;
  const known = p.lines.flatMap((l) => l.values.filter((v): v is number => v !== null));
  const top = p.yMax ?? Math.max(p.yMin ?? 0, ...known, 0);
  const yTop = top > 0 ? top * 1.1 : 1;
  const x = (t: number) => Math.min(width, Math.max(0, ((t - t0) / p.windowMs) * width));
  const y = (v: number) => height - (Math.max(0, v) / yTop) * height;
  const marks = p.marks ?? [];
  const latest = p.lines.map((l) => {
    const v = lastKnown(l.values);
    return `${l.label} ${v === null ? '—' : p.format(v)}`;
  }).join(', ');
  const words = `${p.title}: ${latest}${marks.length > 0 ? `; ${marks.length} marked (${marks.map((m) => m.label).slice(-3).join(', ')})` : ''}`;
  return html`<figure class="chart" data-chart=${p.id}>
    <figcaption><strong>${p.title}</strong> ${p.lines.map((l) => html`<span class="legend"><span class=${`swatch ${l.cls}`} aria-hidden="true"></span>${l.label} ${(() => {
      const v = lastKnown(l.values);
      return v === null ? '—' : p.format(v);
    })()}</span>`)}</figcaption>
    <svg viewBox=${`0 0 ${width} ${height}`} preserveAspectRatio="none" role="img" aria-label=${words} data-marks=${marks.length}>
      ${(p.bands ?? []).map((b) => html`<rect class="band" x=${x(b.from)} y="0" width=${Math.max(1, x(b.to) - x(b.from))} height=${height}><title>update in progress</title></rect>`)}
      <line class="axis" x1="0" y1=${height - 0.5} x2=${width} y2=${height - 0.5} />
      ${marks.map((m) => html`<line class="mark" data-mark-at=${m.at} x1=${x(m.at)} y1="0" x2=${x(m.at)} y2=${height}><title>${m.label}</title></line>`)}
      ${p.lines.map((l) => html`<path class=${`line ${l.cls}`} data-line=${l.label} data-values=${l.values.map((v) => (v === null ? '' : String(Math.round(v * 1000) / 1000))).join(',')}
        d=${pathOf(p.times, l.values, x, y)} vector-effect="non-scaling-stroke" />`)}
    </svg>
    <div class="chart-axis muted"><span>${Math.round(p.windowMs / 60_000)} min ago</span><span>top ${p.format(top)}</span><span>now</span></div>
  </figure>`;
}

/** The windows an operator picks from, in seconds (the ring keeps 6 h). */
export const chartWindows = [[300, '5 min'], [900, '15 min'], [3600, '1 h'], [21_600, '6 h']] as const;

/** A small picker of the charts' window; a <select>, so a keyboard and a phone use it as any other. */
export function WindowPicker({ value, set, id }: { value: number; set: (s: number) => void; id: string }) {
  return html`<label class="window" for=${id}>Last <select id=${id} value=${value} onChange=${(e: Event) => set(Number((e.target as HTMLSelectElement).value))}>
    ${chartWindows.map(([s, label]) => html`<option value=${s}>${label}</option>`)}
  </select></label>`;
}

/** How often a chart asks again: its node samples every intervalMs (10 s), so no sooner. */
export const chartPollMs = 5000;

export const formats = {
  rate: (v: number): string => `${v < 10 ? v.toFixed(1) : Math.round(v)}/s`,
  ms: (v: number): string => `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`,
  percent: (v: number): string => `${Math.round(v * 100)}%`,
  count: (v: number): string => String(Math.round(v)),
};
