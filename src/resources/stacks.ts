// Stacks (`shoal stack deploy`): the record of what one stack made, so that `stack ls/ps/rm` and
// `--prune` act on exactly that and nothing else. A stack's services also carry its name as their
// apply source (`stack:NAME`); its networks and secrets are named NAME-... and listed here.
// Written only by the stack routes (src/api/stack-routes.ts), in the same transaction as the
// resources themselves.

import { z } from 'zod';
import type { Assert, Same } from './spec/service-spec.ts';

/** Stack records (StackRecord), by stack name. */
export const stacksCollection = 'shoal.stacks';

export interface StackRecord {
  name: string;
  /** The shoal services, networks and secrets the stack made (sorted). */
  services: string[];
  /** The jobs it made (compose `deploy.mode: replicated-job`). */
  jobs: string[];
  networks: string[];
  secrets: string[];
  /** The firewall policy that publishes its ports (STACK-published), when it has one. */
  policies: string[];
  /** Per service, the services it depends on and the condition (compose depends_on). */
  dependsOn: Record<string, Record<string, 'service_started' | 'service_healthy' | 'service_completed_successfully'>>;
  /** The compose files of the last deploy (their names, as given). */
  files: string[];
  createdAt: number;
  updatedAt: number;
}

export const stackRecordSchema = z.object({
  name: z.string().min(1),
  services: z.array(z.string()),
  jobs: z.array(z.string()).default([]),
  networks: z.array(z.string()),
  secrets: z.array(z.string()),
  policies: z.array(z.string()),
  dependsOn: z.record(z.string(), z.record(z.string(), z.enum(['service_started', 'service_healthy', 'service_completed_successfully']))),
  files: z.array(z.string()),
  createdAt: z.number(),
  updatedAt: z.number(),
}).strict();

export type _StackRecordMatchesSchema = Assert<Same<z.infer<typeof stackRecordSchema>, StackRecord>>;

/** The apply source a stack's services record. */
export function stackSource(stack: string): string {
  return `stack:${stack}`;
}

/** The stack a service belongs to (from its source), or null. */
export function stackOfSource(source: string | null): string | null {
  return source !== null && source.startsWith('stack:') ? source.slice('stack:'.length) : null;
}
