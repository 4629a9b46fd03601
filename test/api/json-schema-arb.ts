// Valid and invalid values from a JSON Schema (the subset the OpenAPI document uses: type, const,
// enum, pattern, lengths, bounds, properties, required, additionalProperties, items, maxItems,
// anyOf, oneOf, allOf, $ref), as fast-check arbitraries, and a small validator for the same
// subset so that every "invalid" value is checked to break the schema.

import fc from 'fast-check';

export type Schema = Record<string, unknown>;
export type Resolve = (ref: string) => Schema;

const codePoints = (s: string): number => [...s].length;

function patternsOf(s: Schema): RegExp[] {
  const own = typeof s.pattern === 'string' ? [s.pattern] : [];
  const all = Array.isArray(s.allOf) ? (s.allOf as Schema[]).flatMap((a) => (typeof a.pattern === 'string' ? [a.pattern] : [])) : [];
  return [...own, ...all].map((p) => new RegExp(p, 'u'));
}

function typeOk(type: unknown, v: unknown): boolean {
  if (Array.isArray(type)) return type.some((t) => typeOk(t, v));
  switch (type) {
    case 'string': return typeof v === 'string';
    case 'integer': return Number.isSafeInteger(v);
    case 'number': return typeof v === 'number' && Number.isFinite(v);
    case 'boolean': return typeof v === 'boolean';
    case 'null': return v === null;
    case 'array': return Array.isArray(v);
    case 'object': return typeof v === 'object' && v !== null && !Array.isArray(v);
    default: return true;
  }
}

function objectOk(s: Schema, v: Record<string, unknown>, resolve: Resolve): boolean {
  const props = (s.properties ?? {}) as Record<string, Schema>;
  if (((s.required ?? []) as string[]).some((k) => !Object.hasOwn(v, k))) return false;
  for (const [k, x] of Object.entries(v)) {
    const p = props[k];
    if (p !== undefined) {
      if (!isValid(p, x, resolve)) return false;
    } else if (s.additionalProperties === false) {
      return false;
    } else if (typeof s.additionalProperties === 'object' && !isValid(s.additionalProperties as Schema, x, resolve)) {
      return false;
    }
  }
  return true;
}

function stringOk(s: Schema, v: string): boolean {
  if (typeof s.minLength === 'number' && codePoints(v) < s.minLength) return false;
  if (typeof s.maxLength === 'number' && codePoints(v) > s.maxLength) return false;
  return patternsOf(s).every((r) => r.test(v));
}

/** Whether `v` satisfies the schema (for the subset above). */
export function isValid(s: Schema, v: unknown, resolve: Resolve): boolean {
  if (typeof s.$ref === 'string') return isValid(resolve(s.$ref), v, resolve);
  if ('const' in s && v !== s.const) return false;
  if (Array.isArray(s.enum) && !s.enum.includes(v)) return false;
  if (Array.isArray(s.anyOf) && !(s.anyOf as Schema[]).some((b) => isValid(b, v, resolve))) return false;
  if (Array.isArray(s.oneOf) && (s.oneOf as Schema[]).filter((b) => isValid(b, v, resolve)).length !== 1) return false;
  if (s.type !== undefined && !typeOk(s.type, v)) return false;
  if (typeof v === 'string') return stringOk(s, v);
  if (typeof v === 'number') {
    if (typeof s.minimum === 'number' && v < s.minimum) return false;
    if (typeof s.maximum === 'number' && v > s.maximum) return false;
  }
  if (Array.isArray(v)) {
    if (typeof s.maxItems === 'number' && v.length > s.maxItems) return false;
    return s.items === undefined || v.every((x) => isValid(s.items as Schema, x, resolve));
  }
  if (typeof v === 'object' && v !== null) return objectOk(s, v as Record<string, unknown>, resolve);
  return true;
}

function validString(s: Schema): fc.Arbitrary<string> {
  const min = typeof s.minLength === 'number' ? s.minLength : 0;
  const max = Math.min(typeof s.maxLength === 'number' ? s.maxLength : 24, 24);
  const base = typeof s.pattern === 'string' ? fc.stringMatching(new RegExp(s.pattern)) : fc.string({ unit: 'grapheme', minLength: Math.min(min, max), maxLength: max });
  return base.filter((v) => stringOk(s, v) && v !== '__proto__');
}

function validObject(s: Schema, resolve: Resolve): fc.Arbitrary<Record<string, unknown>> {
  const props = (s.properties ?? {}) as Record<string, Schema>;
  const required = new Set((s.required ?? []) as string[]);
  const record: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [k, p] of Object.entries(props)) record[k] = valid(p, resolve);
  const fixed = fc.record(record, { requiredKeys: [...required].filter((k) => k in props) });
  if (s.additionalProperties === false || Object.keys(props).length > 0) return fixed as fc.Arbitrary<Record<string, unknown>>;
  // A free-form object (a document).
  return fc.dictionary(fc.string({ maxLength: 8 }).filter((k) => k !== '__proto__'), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }) as fc.Arbitrary<Record<string, unknown>>;
}

/** Values the schema accepts. */
export function valid(s: Schema, resolve: Resolve): fc.Arbitrary<unknown> {
  if (typeof s.$ref === 'string') return valid(resolve(s.$ref), resolve);
  if ('const' in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  const branches = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
  if (branches !== undefined) return fc.oneof(...branches.map((b) => valid(b, resolve))).filter((v) => isValid(s, v, resolve));
  switch (Array.isArray(s.type) ? s.type[0] : s.type) {
    case 'string': return validString(s);
    case 'integer': return fc.integer({ min: typeof s.minimum === 'number' ? s.minimum : -1e6, max: Math.min(typeof s.maximum === 'number' ? s.maximum : 1e9, 1e9) });
    case 'boolean': return fc.boolean();
    case 'null': return fc.constant(null);
    case 'array': return fc.array(valid(s.items as Schema, resolve), { maxLength: Math.min(typeof s.maxItems === 'number' ? s.maxItems : 3, 3) });
    case 'object': return validObject(s, resolve);
    default: return fc.jsonValue({ maxDepth: 1 });
  }
}

/** Strings that break a string schema: too long, too short, or off a pattern. */
function invalidStrings(s: Schema): fc.Arbitrary<unknown>[] {
  const out: fc.Arbitrary<unknown>[] = [];
  if (typeof s.maxLength === 'number') out.push(fc.integer({ min: s.maxLength + 1, max: s.maxLength + 5 }).map((n) => 'x'.repeat(n)));
  if (typeof s.minLength === 'number' && s.minLength > 0) out.push(fc.constant(''));
  if (patternsOf(s).length > 0) {
    const candidates = ['/', 'a/b', '\n', 'a\u0000b', 'x\u007f', '\u0085', '\ud800', 'BAD NAME', ' lead', '-lead', ':', 'a:b', 'W/x', '"', '12345678901234567', 'abc'];
    out.push(fc.constantFrom(...candidates), fc.string({ unit: 'binary', maxLength: 12 }));
  }
  return out;
}

function invalidObject(s: Schema, resolve: Resolve): fc.Arbitrary<unknown>[] {
  const props = (s.properties ?? {}) as Record<string, Schema>;
  const base = validObject(s, resolve);
  const out: fc.Arbitrary<unknown>[] = [];
  const required = (s.required ?? []) as string[];
  if (required.length > 0) {
    out.push(fc.tuple(base, fc.constantFrom(...required)).map(([o, k]) => Object.fromEntries(Object.entries(o).filter(([key]) => key !== k))));
  }
  if (s.additionalProperties === false) out.push(base.map((o) => ({ ...o, unexpectedField: 1 })));
  for (const [k, p] of Object.entries(props)) out.push(fc.tuple(base, invalid(p, resolve)).map(([o, bad]) => ({ ...o, [k]: bad })));
  return out;
}

/** Values the schema refuses (each checked with isValid). */
export function invalid(s: Schema, resolve: Resolve): fc.Arbitrary<unknown> {
  const target = typeof s.$ref === 'string' ? resolve(s.$ref) : s;
  const options: fc.Arbitrary<unknown>[] = [fc.constantFrom<unknown>(null, 'text', 1.5, -1, true, [], {})];
  if ('const' in target) options.push(fc.constant(`not-${String(target.const)}`));
  if (Array.isArray(target.enum)) options.push(fc.constant('bogus-value'));
  const branches = (target.anyOf ?? target.oneOf) as Schema[] | undefined;
  if (branches !== undefined) options.push(...branches.map((b) => invalid(b, resolve)));
  const type = Array.isArray(target.type) ? target.type[0] : target.type;
  if (type === 'string') options.push(...invalidStrings(target));
  if (type === 'integer') {
    if (typeof target.minimum === 'number') options.push(fc.constant(target.minimum - 1));
    if (typeof target.maximum === 'number') options.push(fc.constant(target.maximum + 1));
  }
  if (type === 'array') {
    const item = valid(target.items as Schema, resolve);
    if (typeof target.maxItems === 'number') options.push(item.map((x) => Array.from({ length: (target.maxItems as number) + 1 }, () => x)));
    options.push(fc.tuple(fc.array(item, { maxLength: 2 }), invalid(target.items as Schema, resolve)).map(([xs, bad]) => [...xs, bad]));
  }
  if (type === 'object') options.push(...invalidObject(target, resolve));
  return fc.oneof(...options).filter((v) => !isValid(target, v, resolve));
}
