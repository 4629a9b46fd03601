// Why a task fits nowhere: every node's first rejection, grouped by reason, counted, and said
// in one line. The stages closest to a fit come first (a node short of memory passed every
// check before it), because that is usually what to change; node names are listed when few.
//
//   3 nodes without 2 GiB memory free (n1, n2, n4); 2 nodes excluded by constraint node.labels.role == db (n3, n5)

import type { Rejection } from './types.ts';

export interface NodeRejection {
  stage: number;
  rejection: Rejection;
  nodeName: string;
}

const namesShownMax = 3;

export function explain(rejections: readonly NodeRejection[]): string {
  if (rejections.length === 0) return 'no nodes in the cluster';
  const groups = new Map<string, { stage: number; phrase: string; names: string[]; order: number }>();
  rejections.forEach((r, order) => {
    const key = `${r.stage}\u0000${r.rejection.key}`;
    const g = groups.get(key);
    if (g === undefined) groups.set(key, { stage: r.stage, phrase: r.rejection.phrase, names: [r.nodeName], order });
    else g.names.push(r.nodeName);
  });
  return [...groups.values()]
    .sort((a, b) => b.stage - a.stage || a.order - b.order)
    .map((g) => `${g.names.length} ${g.names.length === 1 ? 'node' : 'nodes'} ${g.phrase} (${names(g.names)})`)
    .join('; ');
}

function names(list: readonly string[]): string {
  const shown = list.slice(0, namesShownMax).join(', ');
  return list.length > namesShownMax ? `${shown}, +${list.length - namesShownMax} more` : shown;
}
