// One-line descriptions of messages and Readies for the trace.

import type { Entry, Message, Ready } from '../../src/raft/types.ts';

export function describeMessage(m: Message): string {
  let s = `${m.type} ${m.from}->${m.to} t${m.term}`;
  if (m.type === 'app' || m.type === 'vote' || m.type === 'preVote') s += ` li${m.index}/lt${m.logTerm}`;
  if (m.type === 'appResp') s += ` i${m.index}${m.reject ? ` REJECT hint ${m.rejectHint}` : ''}`;
  if (m.type === 'voteResp' || m.type === 'preVoteResp') s += m.reject ? ' REJECT' : ' granted';
  if (m.entries.length > 0) s += ` e[${(m.entries[0] as Entry).index}..${(m.entries[m.entries.length - 1] as Entry).index}]`;
  if (m.type === 'app' || m.type === 'heartbeat') s += ` c${m.commit}`;
  if (m.snapshot !== undefined) s += ` snap@${m.snapshot.meta.index}/${m.snapshot.meta.term}`;
  if (m.context !== undefined && m.context !== '') s += ` ctx ${m.context}`;
  return s;
}

export function describeReady(rd: Ready): string {
  const parts: string[] = [];
  if (rd.softState !== undefined) parts.push(`soft ${rd.softState.role}/${rd.softState.leader}`);
  if (rd.hardState !== undefined) parts.push(`hs t${rd.hardState.term} v'${rd.hardState.vote}' c${rd.hardState.commit}`);
  if (rd.snapshot !== undefined) parts.push(`snap@${rd.snapshot.meta.index}`);
  const first = rd.entries[0];
  if (first !== undefined) parts.push(`ents [${first.index}..${first.index + rd.entries.length - 1}]`);
  const c = rd.committedEntries[0];
  if (c !== undefined) parts.push(`apply [${c.index}..${c.index + rd.committedEntries.length - 1}]`);
  if (rd.messages.length > 0) parts.push(`${rd.messages.length} msgs`);
  if (rd.readStates.length > 0) parts.push(`reads ${rd.readStates.map((r) => `${r.context}@${r.index}`).join(',')}`);
  parts.push(rd.mustSync ? 'sync' : 'nosync');
  return parts.join(' ');
}
