// HOST:PORT, the one rule for every address a user types (config file, CLI flags, member
// records added through the API): a host name or IPv4 address, or an IPv6 address in brackets,
// then a port from 1 to 65535. Checked where it is typed, so that a bad port is a clear usage
// error at `shoal init`, not a RangeError when `shoal serve` binds it.

import { z } from 'zod';

const shape = /^(?:[^\s:/[\]]+|\[[0-9a-fA-F:.]+\]):(\d{1,5})$/;
export const portMax = 65535;

export function isHostPort(value: string): boolean {
  const m = shape.exec(value);
  if (m === null) return false;
  const port = Number(m[1]);
  return port >= 1 && port <= portMax;
}

/** Why `value` is not HOST:PORT, in words; undefined when it is. */
export function hostPortProblem(value: string): string | undefined {
  const m = shape.exec(value);
  if (m === null) return 'expected HOST:PORT (e.g. 127.0.0.1:7100, or [::1]:7100)';
  const port = Number(m[1]);
  if (port < 1 || port > portMax) return `the port must be from 1 to ${portMax}, got ${m[1]}`;
  return undefined;
}

export const hostPortSchema = z.string().superRefine((value, ctx) => {
  const problem = hostPortProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

export function splitHostPort(hp: string): { host: string; port: number } {
  const at = hp.lastIndexOf(':');
  return { host: hp.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(hp.slice(at + 1)) };
}
