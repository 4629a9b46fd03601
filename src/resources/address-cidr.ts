// IPv4 addresses and CIDR blocks as plain integers: parsing (strict: four decimal octets, no
// leading zeros, a prefix length, no host bits set), formatting, containment and overlap.
// Overlay networks are IPv4 only in this release (docs/network.md, Resources).

export interface Cidr {
  /** The first address of the block, as an unsigned 32-bit integer. */
  base: number;
  /** The prefix length, 0..32. */
  prefix: number;
}

export type CidrParse = { ok: true; cidr: Cidr } | { ok: false; message: string };

const octet = '(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const addressPattern = new RegExp(`^${octet}\\.${octet}\\.${octet}\\.${octet}$`);

/** An address `a.b.c.d` as an unsigned integer, or null when it is not one. */
export function parseAddress(text: string): number | null {
  const m = addressPattern.exec(text);
  if (m === null) return null;
  return ((Number(m[1]) << 24) | (Number(m[2]) << 16) | (Number(m[3]) << 8) | Number(m[4])) >>> 0;
}

export function formatAddress(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** The number of addresses in a block of this prefix length. */
export function blockSize(prefix: number): number {
  return 2 ** (32 - prefix);
}

export function parseCidr(text: string): CidrParse {
  const slash = text.indexOf('/');
  if (slash < 0) return { ok: false, message: `${JSON.stringify(text)} is not a CIDR block; write it as address/prefix, e.g. 10.20.0.0/16` };
  const address = parseAddress(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (address === null) return { ok: false, message: `${JSON.stringify(text)} is not a CIDR block: ${JSON.stringify(text.slice(0, slash))} is not an IPv4 address (overlay networks are IPv4)` };
  if (!/^(3[0-2]|[12]?\d)$/.test(prefixText)) return { ok: false, message: `${JSON.stringify(text)} is not a CIDR block: the prefix length must be 0..32` };
  const prefix = Number(prefixText);
  const base = prefix === 0 ? 0 : (address & ~(blockSize(prefix) - 1)) >>> 0;
  if (base !== address) {
    return { ok: false, message: `${JSON.stringify(text)} has host bits set; the block is ${formatCidr({ base, prefix })}` };
  }
  return { ok: true, cidr: { base, prefix } };
}

export function formatCidr(c: Cidr): string {
  return `${formatAddress(c.base)}/${c.prefix}`;
}

/** The last address of the block. */
export function lastAddress(c: Cidr): number {
  return c.base + blockSize(c.prefix) - 1;
}

export function cidrContains(c: Cidr, address: number): boolean {
  return address >= c.base && address <= lastAddress(c);
}

/** Two blocks overlap exactly when one contains the other's first address. */
export function cidrsOverlap(a: Cidr, b: Cidr): boolean {
  return cidrContains(a, b.base) || cidrContains(b, a.base);
}

/** Parses a CIDR the store holds (already validated); throws on a bad one, which is a bug. */
export function cidrOf(text: string): Cidr {
  const r = parseCidr(text);
  if (!r.ok) throw new Error(`a stored subnet is not a CIDR block: ${r.message}`);
  return r.cidr;
}
