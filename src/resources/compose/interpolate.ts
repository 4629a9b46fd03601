// Compose interpolation (the Compose Specification, "Interpolation"): `$VAR`, `${VAR}`,
// `${VAR:-default}` / `${VAR-default}`, `${VAR:?message}` / `${VAR?message}`,
// `${VAR:+replacement}` / `${VAR+replacement}`, defaults that nest (`${A:-${B:-x}}`), and `$$`
// for a literal `$`. Applied to every string value of the file (never to keys) after YAML is
// read, so `"${PORT}"` stays a string and `${PORT}` unquoted is a string as well.
//
// Variables come from one lookup (the caller's environment over the `.env` beside the file).
// A missing `${VAR:?message}` or a malformed expression is a problem with its path, like any
// other; every problem of every file is reported at once.

import type { Problems } from '../spec/reader.ts';

export type Lookup = (name: string) => string | undefined;

const nameStart = /[A-Za-z_]/;
const nameChar = /[A-Za-z0-9_]/;

/** The text with its variables replaced, or null (with a problem added at `at`). */
export function interpolate(text: string, lookup: Lookup, at: string, problems: Problems, onUnset: (name: string) => void = () => {}): string | null {
  const r = expand(text, 0, (name, plain) => {
    const v = lookup(name);
    if (v === undefined && plain) onUnset(name);
    return v;
  }, false);
  if (!r.ok) {
    problems.add(at, r.message);
    return null;
  }
  return r.value;
}

type Expanded = { ok: true; value: string; end: number } | { ok: false; message: string };

/** Expands from `i` to the end (or, `inBraces`, to the `}` closing the enclosing expression). */
/** A lookup told whether the variable is used without a default (`$VAR`, `${VAR}`). */
type Lookup2 = (name: string, plain: boolean) => string | undefined;

function expand(text: string, start: number, lookup: Lookup2, inBraces: boolean): Expanded {
  let out = '';
  let i = start;
  while (i < text.length) {
    const c = text[i] ?? '';
    if (inBraces && c === '}') return { ok: true, value: out, end: i };
    if (c !== '$') {
      out += c;
      i++;
      continue;
    }
    const next = text[i + 1] ?? '';
    if (next === '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (next === '{') {
      const r = braced(text, i + 2, lookup);
      if (!r.ok) return r;
      out += r.value;
      i = r.end + 1;
      continue;
    }
    if (nameStart.test(next)) {
      let j = i + 1;
      while (j < text.length && nameChar.test(text[j] ?? '')) j++;
      out += lookup(text.slice(i + 1, j), true) ?? '';
      i = j;
      continue;
    }
    // A lone `$` (at the end, before a space): kept, as Compose does.
    out += c;
    i++;
  }
  if (inBraces) return { ok: false, message: `${JSON.stringify(text)}: a \${ is not closed by }` };
  return { ok: true, value: out, end: i };
}

/** `${...}` from just after the brace: NAME, then an optional operator and its word. */
function braced(text: string, start: number, lookup: Lookup2): Expanded {
  let j = start;
  if (!nameStart.test(text[j] ?? '')) return { ok: false, message: `${JSON.stringify(text)}: \${ must be followed by a variable name (letters, digits and _)` };
  while (j < text.length && nameChar.test(text[j] ?? '')) j++;
  const name = text.slice(start, j);
  if (text[j] === '}') return { ok: true, value: lookup(name, true) ?? '', end: j };
  const value = lookup(name, false);
  if (j >= text.length) return { ok: false, message: `${JSON.stringify(text)}: a \${ is not closed by }` };
  const colon = text[j] === ':';
  const op = text[colon ? j + 1 : j] ?? '';
  if (!['-', '?', '+'].includes(op)) {
    return { ok: false, message: `${JSON.stringify(text)}: \${${name}${text.slice(j, j + 2)}... is not an expression Compose knows (\${VAR}, \${VAR:-default}, \${VAR:?message}, \${VAR:+replacement})` };
  }
  const word = expand(text, j + (colon ? 2 : 1), lookup, true);
  if (!word.ok) return word;
  const unset = colon ? value === undefined || value === '' : value === undefined;
  if (op === '-') return { ok: true, value: unset ? word.value : value ?? '', end: word.end };
  if (op === '+') return { ok: true, value: unset ? '' : word.value, end: word.end };
  if (unset) {
    const said = word.value === '' ? `${name} is required` : word.value;
    return { ok: false, message: `variable ${name} is ${value === undefined ? 'not set' : 'empty'}: ${said} (set it in the environment or in the .env file beside the compose file)` };
  }
  return { ok: true, value: value ?? '', end: word.end };
}

/**
 * A `.env` file (and an `env_file`): `KEY=VALUE` lines, `#` comments, blank lines, an optional
 * `export ` prefix, values in single quotes (literal), double quotes (with \n, \t, \\ and \"
 * escapes) or bare (a ` #` starts a comment). A line without `=` names a variable with no value
 * (left out). Problems are added at `at:LINE`.
 */
export function parseEnvFile(text: string, at: string, problems: Problems): Map<string, string> {
  const out = new Map<string, string>();
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*(=)?\s*(.*)$/.exec(line);
    if (m === null) {
      problems.add(`${at}:${index + 1}`, `${JSON.stringify(raw)} is not KEY=VALUE`);
      return;
    }
    const [, key = '', eq, rest = ''] = m;
    if (eq === undefined) return;
    out.set(key, envValue(rest));
  });
  return out;
}

function envValue(rest: string): string {
  if (rest.startsWith("'")) {
    const end = rest.indexOf("'", 1);
    return end < 0 ? rest.slice(1) : rest.slice(1, end);
  }
  if (rest.startsWith('"')) {
    let v = '';
    for (let i = 1; i < rest.length; i++) {
      const c = rest[i] ?? '';
      if (c === '"') break;
      if (c === '\\' && i + 1 < rest.length) {
        const e = rest[++i] ?? '';
        v += e === 'n' ? '\n' : e === 't' ? '\t' : e === 'r' ? '\r' : e;
        continue;
      }
      v += c;
    }
    return v;
  }
  const hash = rest.search(/\s#/);
  return (hash < 0 ? rest : rest.slice(0, hash)).trim();
}

/**
 * A command written as one string (`command: npm run start -- --port 80`), split as Compose
 * splits it: on spaces, with single and double quotes and backslash escapes; no shell runs it.
 */
export function splitCommand(text: string): string[] | null {
  const out: string[] = [];
  let cur = '';
  let any = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] ?? '';
    if (quote === "'") {
      if (c === "'") quote = null;
      else cur += c;
      continue;
    }
    if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === '\\' && ['"', '\\', '$', '`'].includes(text[i + 1] ?? '')) cur += text[++i] ?? '';
      else cur += c;
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      any = true;
    } else if (c === '\\' && i + 1 < text.length) {
      cur += text[++i] ?? '';
      any = true;
    } else if (/\s/.test(c)) {
      if (any || cur !== '') out.push(cur);
      cur = '';
      any = false;
    } else {
      cur += c;
    }
  }
  if (quote !== null) return null;
  if (any || cur !== '') out.push(cur);
  return out;
}
