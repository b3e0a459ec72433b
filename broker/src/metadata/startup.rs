//! The image a node starts from: the stored one, completed with the internal topics and
//! fitted to this node's id and core count.

use super::apply::apply_all;
use super::decide::{create_topic, CreateTopic};
use super::image::{MetadataImage, TopicId};
use super::internal::{
    OFFSETS_SEGMENT_BYTES, OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, TRANSACTION_STATE_PARTITIONS,
    TRANSACTION_STATE_TOPIC,
};
use super::placement::PlacementPolicy;
use super::records::MetadataRecord;
use super::store;
use std::collections::BTreeMap;

/// The records that create the internal topics an image lacks (none when it has them all).
pub fn missing_internal_topics(
    image: &MetadataImage,
    policy: PlacementPolicy,
    topic_id: TopicId,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    if image.topic(OFFSETS_TOPIC).is_none() {
        // The definition is valid by construction; a failure here is a bug.
        records = create_topic(image, &offsets_topic(), policy, topic_id)
            .unwrap_or_else(|error| panic!("the offsets topic definition is invalid: {error}"));
    }
    if image.topic(TRANSACTION_STATE_TOPIC).is_none() {
        let image = apply_all(image, &records)
            .unwrap_or_else(|error| panic!("the offsets topic records do not apply: {error}"));
        // Another id than the offsets topic's: the caller's id with its last byte flipped.
        let mut txn_id = topic_id;
        txn_id[15] ^= 0xff;
        records.extend(
            create_topic(&image, &transaction_state_topic(), policy, txn_id).unwrap_or_else(
                |error| panic!("the transaction state topic definition is invalid: {error}"),
            ),
        );
    }
    records
}

/// `__transaction_state` as created: like `__consumer_offsets` (at a single node's first
/// start, in a cluster by the first FindCoordinator for a transactional id).
pub fn transaction_state_topic() -> CreateTopic {
    let mut configs = BTreeMap::new();
    // Kept until deleted: the coordinator keeps only live ids' records (as compaction would).
    configs.insert("retention.ms".to_string(), "-1".to_string());
    configs.insert("segment.bytes".to_string(), OFFSETS_SEGMENT_BYTES.to_string());
    CreateTopic {
        name: TRANSACTION_STATE_TOPIC.to_string(),
        partitions: TRANSACTION_STATE_PARTITIONS,
        configs,
        validate_only: false,
        ..Default::default()
    }
}

/// `__share_group_state` as created, on the first share partition's need of it (KIP-932):
/// compacted, since strata writes only whole snapshots (the newest record of a key is the
/// state), kept otherwise until deleted.
pub fn share_state_topic() -> CreateTopic {
    let mut configs = BTreeMap::new();
    configs.insert("cleanup.policy".to_string(), "compact".to_string());
    configs.insert("retention.ms".to_string(), "-1".to_string());
    configs.insert("segment.bytes".to_string(), OFFSETS_SEGMENT_BYTES.to_string());
    CreateTopic {
        name: crate::metadata::internal::SHARE_STATE_TOPIC.to_string(),
        partitions: crate::metadata::internal::SHARE_STATE_PARTITIONS,
        configs,
        validate_only: false,
        ..Default::default()
    }
}

/// `__consumer_offsets` as created: at a single node's first start, and in a cluster by the
/// first FindCoordinator that finds it missing (as Kafka does), placed across the brokers
/// registered then.
pub fn offsets_topic() -> CreateTopic {
    let mut configs = BTreeMap::new();
    // Offsets are kept until deleted (the coordinator expires and compacts them itself).
    configs.insert("retention.ms".to_string(), "-1".to_string());
    configs.insert("segment.bytes".to_string(), OFFSETS_SEGMENT_BYTES.to_string());
    CreateTopic {
        name: OFFSETS_TOPIC.to_string(),
        partitions: OFFSETS_TOPIC_PARTITIONS,
        configs,
        validate_only: false,
        ..Default::default()
    }
}

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
/// node (an image written before `meta.properties` pinned the node id may name another), and
/// a partition placed on a shard this run does not have (fewer cores than before) gets its
/// initial shard for today's count. Partitions on shards that still exist keep them. Returns
/// the image and whether anything moved.
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
    use crate::metadata::internal::OFFSETS_TOPIC;
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

    #[test]
    fn the_offsets_topic_is_created_once() {
        let policy = PlacementPolicy { node: wire::ids::NodeId(0), shard_count: 2 };
        let records = missing_internal_topics(&MetadataImage::default(), policy, [3; 16]);
        let image = crate::metadata::apply_all(&MetadataImage::default(), &records).expect("ok");
        let topic = image.topic(OFFSETS_TOPIC).expect("created");
        assert_eq!(topic.partition_count(), OFFSETS_TOPIC_PARTITIONS);
        assert_eq!(topic.configs.get("retention.ms").map(String::as_str), Some("-1"));
        assert!(missing_internal_topics(&image, policy, [4; 16]).is_empty());
    }
}
