// Quantities in specs: CPU (millicores), memory (bytes) and durations (milliseconds).
//
// Parsed with integer arithmetic (BigInt) so that "1.1Gi" or "0.7" mean exactly what they say:
// a float multiply would turn 0.7 CPU into 699.9999 millicores and then into a rounding rule
// nobody wrote down. A quantity that is not a whole number of the base unit is refused.
//
// Each parser returns the value or a message saying what is wrong and what to write instead.

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

const decimalPattern = /^(\d+)(?:\.(\d+))?$/;

/** `text × factor / divisor` when `text` is a plain decimal and the result is a whole number. */
function scaleDecimal(text: string, factor: bigint, divisor: bigint = 1n): bigint | 'not-decimal' | 'not-whole' {
  const m = decimalPattern.exec(text);
  if (m === null) return 'not-decimal';
  const fraction = m[2] ?? '';
  const mantissa = BigInt((m[1] ?? '0') + fraction);
  const scaled = mantissa * factor;
  const denominator = divisor * 10n ** BigInt(fraction.length);
  if (scaled % denominator !== 0n) return 'not-whole';
  return scaled / denominator;
}

function safeNumber(n: bigint): number | null {
  return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : null;
}

/** Numbers from YAML or JSON become their decimal text; exponents (1e-7) are refused below. */
function asText(value: number | string): string {
  return typeof value === 'number' ? String(value) : value.trim();
}

/**
 * CPU as millicores: `500m`, `0.5`, `2`, `"1.5"` (a whole or decimal number of CPUs, or a whole
 * number of millicores with `m`).
 */
export function parseCpu(value: number | string): Parsed<number> {
  const text = asText(value);
  const hint = 'write CPUs as a number (0.5, 2) or millicores (500m)';
  if (text.endsWith('m')) {
    const milli = scaleDecimal(text.slice(0, -1), 1n);
    if (milli === 'not-decimal') return { ok: false, message: `"${text}" is not a CPU quantity; ${hint}` };
    if (milli === 'not-whole') return { ok: false, message: `"${text}" is finer than one millicore` };
    const n = safeNumber(milli);
    return n === null ? { ok: false, message: `"${text}" is too large` } : { ok: true, value: n };
  }
  const milli = scaleDecimal(text, 1000n);
  if (milli === 'not-decimal') return { ok: false, message: `"${text}" is not a CPU quantity; ${hint}` };
  if (milli === 'not-whole') return { ok: false, message: `"${text}" is finer than one millicore (0.001)` };
  const n = safeNumber(milli);
  return n === null ? { ok: false, message: `"${text}" is too large` } : { ok: true, value: n };
}

const memoryUnits: Readonly<Record<string, bigint>> = {
  '': 1n,
  k: 1000n,
  M: 1000n ** 2n,
  G: 1000n ** 3n,
  T: 1000n ** 4n,
  Ki: 1024n,
  Mi: 1024n ** 2n,
  Gi: 1024n ** 3n,
  Ti: 1024n ** 4n,
};

const memoryPattern = /^(\d+(?:\.\d+)?)([A-Za-z]*)$/;

/** Suffixes people write that mean different things to different tools; refused with a hint. */
function ambiguousMemoryHint(suffix: string): string | null {
  if (suffix === 'm' || suffix === 'g' || suffix === 'K') {
    return `"${suffix}" is ambiguous (Docker reads 512m as MiB, Kubernetes as millibytes); write Mi, Gi, Ki (binary) or M, G, k (decimal)`;
  }
  if (/^(K|M|G|T)i?B$/i.test(suffix) || /^b$/i.test(suffix)) {
    return `write ${suffix.replace(/B$/i, '') || 'bytes without a suffix'} without the "B" (512Mi, 1G)`;
  }
  return null;
}

/**
 * Memory as bytes: a whole number of bytes, or a decimal with one of k, M, G, T (powers of
 * 1000) or Ki, Mi, Gi, Ti (powers of 1024): `512Mi`, `1Gi`, `256M`, `1.5Gi`, `1073741824`.
 */
export function parseMemory(value: number | string): Parsed<number> {
  const text = asText(value);
  const units = 'k, M, G, T, Ki, Mi, Gi or Ti';
  const m = memoryPattern.exec(text);
  if (m === null) return { ok: false, message: `"${text}" is not a memory quantity; write bytes or a number with ${units} (512Mi, 1Gi)` };
  const suffix = m[2] ?? '';
  const factor = memoryUnits[suffix];
  if (factor === undefined) {
    const hint = ambiguousMemoryHint(suffix) ?? `the unit "${suffix}" is not one of ${units}`;
    return { ok: false, message: `"${text}": ${hint}` };
  }
  const bytes = scaleDecimal(m[1] ?? '', factor);
  if (bytes === 'not-decimal') return { ok: false, message: `"${text}" is not a memory quantity` };
  if (bytes === 'not-whole') return { ok: false, message: `"${text}" is not a whole number of bytes` };
  const n = safeNumber(bytes);
  return n === null ? { ok: false, message: `"${text}" is too large` } : { ok: true, value: n };
}

const durationUnitsMs: Readonly<Record<string, bigint>> = { ms: 1n, s: 1000n, m: 60_000n, h: 3_600_000n };
const durationPattern = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/;
const durationToken = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;

/**
 * A duration as milliseconds: one or more number-unit pairs, units ms, s, m, h (`10s`, `1m30s`,
 * `500ms`, `1.5s`), or `0`. A bare number is refused: seconds to one tool are nanoseconds to
 * another.
 */
export function parseDuration(value: number | string): Parsed<number> {
  if (value === 0 || value === '0') return { ok: true, value: 0 };
  const text = typeof value === 'number' ? '' : value.trim();
  if (typeof value === 'number' || /^\d+(\.\d+)?$/.test(text)) {
    return { ok: false, message: `${String(value)} has no unit; write a duration such as 10s, 1m30s or 500ms` };
  }
  if (!durationPattern.test(text)) {
    return { ok: false, message: `"${text}" is not a duration; write one such as 10s, 1m30s or 500ms (units ms, s, m, h)` };
  }
  let total = 0n;
  for (const [, amount, unit] of text.matchAll(durationToken)) {
    const ms = scaleDecimal(amount ?? '', durationUnitsMs[unit ?? ''] ?? 1n);
    if (typeof ms !== 'bigint') return { ok: false, message: `"${text}" is finer than one millisecond` };
    total += ms;
  }
  const n = safeNumber(total);
  return n === null ? { ok: false, message: `"${text}" is too long` } : { ok: true, value: n };
}

function trimDecimals(n: number, digits: number): string {
  return n.toFixed(digits).replace(/\.?0+$/, '');
}

/** For people: `2 GiB`, `512 MiB`, `1.5 GiB`, `300 bytes`. */
export function formatMemory(bytes: number): string {
  const units: [string, number][] = [['TiB', 1024 ** 4], ['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]];
  for (const [name, size] of units) {
    if (bytes >= size) return `${trimDecimals(bytes / size, 2)} ${name}`;
  }
  return `${bytes} bytes`;
}

/** For people: `0.5 CPU`, `2 CPUs`, `0.25 CPU`. */
export function formatCpu(millis: number): string {
  const cpus = millis / 1000;
  return `${trimDecimals(cpus, 3)} ${cpus > 1 ? 'CPUs' : 'CPU'}`;
}

/** Exact and parseable back: `1Gi`, `500M`, `1536` (largest unit that divides exactly). */
export function renderMemory(bytes: number): string {
  const units: [string, number][] = [['Ti', 1024 ** 4], ['Gi', 1024 ** 3], ['Mi', 1024 ** 2], ['Ki', 1024],
    ['T', 1000 ** 4], ['G', 1000 ** 3], ['M', 1000 ** 2], ['k', 1000]];
  if (bytes === 0) return '0';
  for (const [name, size] of units) {
    if (bytes % size === 0) return `${bytes / size}${name}`;
  }
  return String(bytes);
}

/** Exact and parseable back: `2`, `500m`. */
export function renderCpu(millis: number): string {
  return millis % 1000 === 0 ? String(millis / 1000) : `${millis}m`;
}

/** Exact and parseable back: `1h2m3s`, `1m30s`, `500ms`, `0s`. */
export function renderDuration(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1000], ['ms', 1]] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  return parts.join('');
}
