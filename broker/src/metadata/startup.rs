//! The image a node starts from: the stored one, completed with the internal topics and
//! fitted to this node's id and core count.

use super::apply::apply_all;
use super::image::{MetadataImage, TopicId};
use super::internal::missing_internal_topics;
use super::placement::PlacementPolicy;
use super::store;

/// The image a node starts from: the stored file's (format 1 is migrated) or, without one, a
/// new cluster's; with the internal topics added and the placement fitted to this node (see
/// `placement::fit_to_node`). The flag says whether it differs from the file and must be
/// written back before the node serves.
pub fn startup_image(
    stored: Option<&[u8]>,
    policy: PlacementPolicy,
    internal_topic_id: TopicId,
) -> Result<(MetadataImage, bool), String> {
    let (image, mut persist) = match stored {
        Some(bytes) => store::load(bytes, policy)?,
        None => (store::new_cluster(), true),
    };
    let internal = missing_internal_topics(&image, policy, internal_topic_id);
    let image = apply_all(&image, &internal).map_err(|e| format!("internal topics: {e}"))?;
    persist |= !internal.is_empty();
    let (image, moved) = fit_to_node(image, policy);
    if moved {
        tracing::info!("partitions placed for this node's id and core count");
    }
    Ok((image, persist || moved))
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
    use crate::metadata::placement::Placement;
    use wire::ids::NodeId;

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
