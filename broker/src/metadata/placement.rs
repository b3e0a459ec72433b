//! Partition placement: which node leads a partition, on which of its shards, in which leader
//! epoch, with which replicas. Requests are routed by placement, never by a hash at the call
//! site (Redpanda's shard table, DESIGN.md §5).
//!
//! A new partition's placement comes from `PlacementPolicy::initial`: this node, the shard
//! `shard::runtime::shard_of` chooses (FNV-1a of the topic, then round-robin), epoch 0, one
//! replica. It is persisted with the topic, so the placement of existing data does not change
//! when the core count changes; only a partition whose shard no longer exists is moved, at
//! startup (`startup::fit_to_node`).
//! Runs on: any shard (pure functions).

use shard::runtime::ShardId;
use wire::ids::{LeaderEpoch, NodeId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub leader: NodeId,
    /// The shard of the leader that owns the partition.
    pub shard: ShardId,
    pub leader_epoch: LeaderEpoch,
    pub replicas: Vec<NodeId>,
    /// The in-sync replicas (KIP-631's PartitionRecord `isr`): never empty; a leaderless
    /// partition keeps its last in-sync replica, as Kafka does. Until replication (issue #16)
    /// it is the leader alone.
    pub isr: Vec<NodeId>,
    /// Bumped by every change of the partition's leader or ISR (Kafka's partition epoch).
    pub partition_epoch: i32,
    /// A reassignment in progress (KIP-455): the replicas joining (`adding`) and leaving
    /// (`removing`); `replicas` is then the target followed by those leaving. Both empty when
    /// none runs (`metadata::reassign`).
    pub adding: Vec<NodeId>,
    pub removing: Vec<NodeId>,
}

impl Placement {
    /// Whether a reassignment of the partition is in progress.
    pub fn reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }
}

/// How new partitions are placed: on `node`, spread over its `shard_count` shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacementPolicy {
    pub node: NodeId,
    pub shard_count: usize,
}

impl PlacementPolicy {
    pub fn initial(&self, topic: &str, partition: i32) -> Placement {
        Placement {
            leader: self.node,
            shard: shard::runtime::shard_of(topic, partition, self.shard_count),
            leader_epoch: LeaderEpoch(0),
            replicas: vec![self.node],
            isr: vec![self.node],
            partition_epoch: 0,
            adding: Vec::new(),
            removing: Vec::new(),
        }
    }
}
