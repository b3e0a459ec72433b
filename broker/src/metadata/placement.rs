//! Partition placement: which node leads a partition, on which of its shards, in which leader
//! epoch, with which replicas. Requests are routed by placement, never by a hash at the call
//! site (Redpanda's shard table, DESIGN.md §5).
//!
//! A new partition's placement comes from `PlacementPolicy::initial`: this node, the shard
//! `shard::runtime::shard_of` chooses (FNV-1a of the topic, then round-robin), epoch 0, one
//! replica. It is persisted with the topic, so the placement of existing data does not change
//! when the core count changes; only a partition whose shard no longer exists is moved, at
//! startup (`fit_to_node`).
//! Runs on: any shard (pure functions).

use super::image::MetadataImage;
use shard::runtime::ShardId;
use wire::ids::{LeaderEpoch, NodeId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub leader: NodeId,
    /// The shard of the leader that owns the partition.
    pub shard: ShardId,
    pub leader_epoch: LeaderEpoch,
    pub replicas: Vec<NodeId>,
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
        }
    }
}

/// Fits an image to this node at startup: on a one-node cluster every partition is led by this
/// node (its `node.id` may have been changed), and a partition placed on a shard this run does
/// not have (fewer cores than before) gets its initial shard for today's count. Partitions on
/// shards that still exist keep them. Returns the image and whether anything moved.
pub fn fit_to_node(mut image: MetadataImage, policy: PlacementPolicy) -> (MetadataImage, bool) {
    let mut moved = false;
    for topic in image.topics.values_mut() {
        for (index, placement) in topic.partitions.iter_mut().enumerate() {
            if placement.leader != policy.node || placement.replicas != [policy.node] {
                placement.leader = policy.node;
                placement.replicas = vec![policy.node];
                moved = true;
            }
            if usize::from(placement.shard.0) >= policy.shard_count {
                let index = i32::try_from(index).unwrap_or(i32::MAX);
                placement.shard = shard::runtime::shard_of(&topic.name, index, policy.shard_count);
                moved = true;
            }
        }
    }
    (image, moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::image::TopicImage;

    fn image_with(placements: Vec<Placement>) -> MetadataImage {
        let mut image = MetadataImage::default();
        image.topics.insert(
            "t".into(),
            TopicImage {
                name: "t".into(),
                topic_id: [1; 16],
                partitions: placements,
                configs: Default::default(),
            },
        );
        image
    }

    #[test]
    fn placement_survives_a_larger_core_count_and_moves_only_from_missing_shards() {
        let four = PlacementPolicy { node: NodeId(0), shard_count: 4 };
        let placed: Vec<Placement> = (0..8).map(|p| four.initial("t", p)).collect();
        let (grown, moved) =
            fit_to_node(image_with(placed.clone()), PlacementPolicy { shard_count: 8, ..four });
        assert!(!moved, "more cores: nothing moves");
        assert_eq!(grown.topics["t"].partitions, placed);
        let (shrunk, moved) =
            fit_to_node(image_with(placed.clone()), PlacementPolicy { shard_count: 2, ..four });
        assert!(moved);
        for (before, after) in placed.iter().zip(&shrunk.topics["t"].partitions) {
            assert!(after.shard.0 < 2);
            if before.shard.0 < 2 {
                assert_eq!(before.shard, after.shard, "a partition on a live shard stays");
            }
        }
    }

    #[test]
    fn a_changed_node_id_takes_over_every_partition() {
        let old = PlacementPolicy { node: NodeId(7), shard_count: 2 };
        let (image, moved) = fit_to_node(
            image_with(vec![old.initial("t", 0)]),
            PlacementPolicy { node: NodeId(1), shard_count: 2 },
        );
        assert!(moved);
        assert_eq!(image.topics["t"].partitions[0].leader, NodeId(1));
        assert_eq!(image.topics["t"].partitions[0].replicas, vec![NodeId(1)]);
    }
}
