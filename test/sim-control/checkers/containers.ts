// Checker 4: what the container runtimes hold (the ground truth of what runs). No task has two
// running containers anywhere; a running container carries the id of the node whose runtime it
// is on, and the node, epoch and term the task was placed with (the world's record of the
// committed placement); and a node never runs containers of two epochs at once (a node whose
// epoch was raised removes the old epoch's containers before it starts anything new).

import { labelKeys } from '../../../src/executor/labels.ts';
import type { ContainerInfo } from '../../../src/executor/runtime.ts';
import { Violation } from './violation.ts';

export interface RuntimeFact {
  nodeId: string;
  containers: readonly ContainerInfo[];
}

export interface PlacedRecord {
  nodeId: string;
  epoch: number;
  term: number;
}

export class ContainersChecker {
  check(runtimes: readonly RuntimeFact[], placed: ReadonlyMap<string, PlacedRecord>): void {
    const byTask = new Map<string, string>();
    for (const rt of runtimes) {
      const epochs = new Set<string>();
      for (const c of rt.containers) {
        if (c.state !== 'running') continue;
        const task = c.labels[labelKeys.task] ?? '';
        const where = `container ${c.id} (${c.name}) on ${rt.nodeId}`;
        const other = byTask.get(task);
        if (other !== undefined) throw new Violation('containers', `task ${task} runs twice: ${other} and ${where}`);
        byTask.set(task, where);
        const p = placed.get(task);
        if (p === undefined) throw new Violation('containers', `${where} runs task ${task}, which was never placed`);
        const node = c.labels[labelKeys.node];
        const epoch = c.labels[labelKeys.nodeEpoch];
        const term = c.labels[labelKeys.term];
        if (node !== rt.nodeId || p.nodeId !== rt.nodeId) throw new Violation('containers', `${where} is labelled node ${String(node)}; its task was placed on ${p.nodeId}`);
        if (epoch !== String(p.epoch) || term !== String(p.term)) {
          throw new Violation('containers', `${where} is labelled epoch ${String(epoch)} term ${String(term)}; its task was placed in epoch ${p.epoch} by term ${p.term}`);
        }
        epochs.add(epoch);
      }
      if (epochs.size > 1) throw new Violation('containers', `${rt.nodeId} runs containers of epochs ${[...epochs].join(' and ')} at once`);
    }
  }
}
