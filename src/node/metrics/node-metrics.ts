// The metrics of one node: Raft state, peers, proposals, bounds, storage and failure. Most are
// read at scrape time from state the node keeps anyway, so the hot path pays nothing for them.
// docs/monitoring.md lists every metric with what to alert on.

import type { StatsFs } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { Gauge } from 'prom-client';
import type { RaftNode } from '../raft-node.ts';
import type { Registry, Sample } from '../../base/metrics.ts';

export interface NodeMetricsOptions {
  identity: { id: string; name: string; clusterId: string };
  softwareVersion: string;
  electionTimeoutMs: number;
  /** The data directory, whose filesystem's free space is reported. */
  dataDir: string;
}

/** The failures `RaftNode.failure` reports; each has a series, 0 or 1 (a state set). */
const failureCodes = ['disk_stalled', 'node_failed', 'upgrade_required', 'removed'] as const;

const one = (value: number): Sample[] => [{ value }];

export function registerNodeMetrics(metrics: Registry, node: RaftNode, o: NodeMetricsOptions): void {
  metrics.gauge({
    name: 'shoal_node_info', help: 'Always 1; the labels say which node this is (join on id to name peers).', type: 'gauge',
    labelNames: ['id', 'name', 'cluster', 'version'],
    read: () => [{ labels: { id: o.identity.id, name: o.identity.name, cluster: o.identity.clusterId, version: o.softwareVersion }, value: 1 }],
  });
  registerRaftMetrics(metrics, node, o.electionTimeoutMs);
  registerPeerMetrics(metrics, node);
  registerProposalMetrics(metrics, node);
  metrics.gauge({
    name: 'shoal_node_failed', help: 'Per failure code, 1 while the node cannot serve for that reason (RaftNode.failure), else 0.', type: 'gauge',
    labelNames: ['code'],
    read: () => {
      const code = node.failure?.code;
      return failureCodes.map((c) => ({ labels: { code: c }, value: c === code ? 1 : 0 }));
    },
  });
  registerStorageMetrics(metrics, o.dataDir);
}

function registerRaftMetrics(metrics: Registry, node: RaftNode, electionTimeoutMs: number): void {
  const st = () => node.status();
  metrics.gauge({ name: 'shoal_raft_term', help: 'Current Raft term.', type: 'gauge', read: () => one(node.currentTerm) });
  metrics.gauge({ name: 'shoal_raft_is_leader', help: '1 if this node is the leader.', type: 'gauge', read: () => one(node.isLeader ? 1 : 0) });
  metrics.gauge({ name: 'shoal_raft_has_leader', help: '1 if this node knows a leader (itself or another).', type: 'gauge', read: () => one(node.leaderId !== '' ? 1 : 0) });
  metrics.gauge({ name: 'shoal_raft_leader_changes_total', help: 'Leader changes seen by this node.', type: 'counter', read: () => one(node.leaderChanges) });
  metrics.gauge({ name: 'shoal_raft_commit_index', help: 'Highest log index known committed.', type: 'gauge', read: () => one(st().commit) });
  metrics.gauge({ name: 'shoal_raft_applied_index', help: 'Highest log index applied to the store.', type: 'gauge', read: () => one(node.appliedIndex) });
  metrics.gauge({ name: 'shoal_raft_apply_lag_entries', help: 'Committed entries not yet applied.', type: 'gauge', read: () => one(Math.max(0, st().commit - node.appliedIndex)) });
  metrics.gauge({ name: 'shoal_raft_snapshot_index', help: 'Log index of the newest snapshot this node holds.', type: 'gauge', read: () => one(node.latestSnapshotIndex) });
  metrics.gauge({ name: 'shoal_raft_election_timeout_seconds', help: 'The configured election timeout (raft.electionTimeoutMs); alerts compare sync and round-trip times with it.', type: 'gauge', read: () => one(electionTimeoutMs / 1000) });
  metrics.gauge({ name: 'shoal_cluster_feature_level', help: 'The committed cluster feature level (docs/operations.md, rolling upgrades).', type: 'gauge', read: () => one(node.featureLevel) });
  metrics.add(node.snapshotDuration);
}

function registerPeerMetrics(metrics: Registry, node: RaftNode): void {
  const byPeer = (value: (p: ReturnType<RaftNode['peerStats']>[number]) => number | null): Sample[] =>
    node.peerStats().flatMap((p) => {
      const v = value(p);
      return v === null ? [] : [{ labels: { peer: p.id }, value: v }];
    });
  metrics.gauge({
    name: 'shoal_peer_lag_entries', help: 'Entries a member is behind the leader (leader only).', type: 'gauge', labelNames: ['peer'],
    read: () => {
      const s = node.status();
      return Object.entries(s.progress ?? {}).filter(([id]) => id !== s.id).map(([id, pr]) => ({ labels: { peer: id }, value: Math.max(0, s.lastIndex - pr.match) }));
    },
  });
  metrics.gauge({ name: 'shoal_peer_rtt_seconds', help: 'Latest round-trip time to each peer.', type: 'gauge', labelNames: ['peer'], read: () => byPeer((p) => (p.rttMs === null ? null : p.rttMs / 1000)) });
  metrics.gauge({ name: 'shoal_peer_connected', help: '1 if the outbound connection to the peer is up.', type: 'gauge', labelNames: ['peer'], read: () => byPeer((p) => (p.connected ? 1 : 0)) });
  metrics.gauge({ name: 'shoal_peer_send_queue_messages', help: 'Messages waiting to be written to each peer.', type: 'gauge', labelNames: ['peer'], read: () => byPeer((p) => p.queued) });
  metrics.gauge({
    name: 'shoal_peer_send_dropped_total', help: 'Messages to each peer that were dropped instead of sent (queue full, too large, peer gone); Raft resends what matters.',
    type: 'counter', labelNames: ['peer'], read: () => byPeer((p) => p.dropped),
  });
}

function registerProposalMetrics(metrics: Registry, node: RaftNode): void {
  metrics.add(node.proposalLatency);
  metrics.add(node.proposalsCommitted);
  metrics.add(node.proposalsFailed);
  metrics.gauge({ name: 'shoal_proposals_pending', help: 'Proposals made here and waiting to be applied (bound: proposalsPendingMax).', type: 'gauge', read: () => one(node.pendingCounts().proposals) });
  metrics.gauge({ name: 'shoal_reads_pending', help: 'Linearizable reads waiting here (bound: readsPendingMax).', type: 'gauge', read: () => one(node.pendingCounts().reads) });
  metrics.gauge({
    name: 'shoal_overload_refusals_total', help: 'Proposals and reads refused with overloaded because a bound of this node was full, by the bound.',
    type: 'counter', labelNames: ['limit'],
    read: () => [
      { labels: { limit: 'proposalsPendingMax' }, value: node.overloads.proposals },
      { labels: { limit: 'readsPendingMax' }, value: node.overloads.reads },
    ],
  });
  metrics.gauge({
    name: 'shoal_proposals_reproposed_total', help: 'Writes made here that were proposed again because a change of leader lost them (their term passed without them); the client saw no error.',
    type: 'counter', read: () => one(node.reproposedProposals),
  });
  metrics.gauge({
    name: 'shoal_apply_stale_proposals_total', help: 'Log entries applied as no-ops because they were appended in a term other than the one they were proposed in (a late or re-proposed write; it applies once).',
    type: 'counter', read: () => one(node.staleProposals),
  });
  metrics.gauge({
    name: 'shoal_apply_invalid_commands_total', help: 'Log entries that were not a valid command and were applied as no-ops (invalid_command); see the node log.',
    type: 'counter', read: () => one(node.invalidEntries),
  });
}

function registerStorageMetrics(metrics: Registry, dataDir: string): void {
  // Read when scraped; statfs answers from the kernel without touching the disk. A failed read
  // keeps the previous value (a 0 would page someone about a full disk).
  const fsGauge = (name: string, help: string, pick: (s: StatsFs) => number): void => {
    new Gauge({
      name, help, registers: [metrics.prom],
      async collect() {
        try {
          this.set(pick(await statfs(dataDir)));
        } catch {
          // keep the previous value
        }
      },
    });
  };
  fsGauge('shoal_storage_filesystem_avail_bytes', 'Bytes available to this process on the filesystem of the data directory.', (s) => s.bavail * s.bsize);
  fsGauge('shoal_storage_filesystem_size_bytes', 'Size of the filesystem of the data directory.', (s) => s.blocks * s.bsize);
}
