//! Internal topics: `__consumer_offsets` (committed offsets and group metadata), created at
//! first start, and the placement of a consumer group on one of its partitions.
//! References: Kafka `GroupCoordinator.partitionFor` (`abs(hashCode) % offsets.topic.num.partitions`).

use super::decide::{create_topic, CreateTopic};
use super::image::{MetadataImage, TopicId};
use super::placement::PlacementPolicy;
use super::records::MetadataRecord;
use std::collections::BTreeMap;

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's `offsets.topic.num.partitions` default.
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;
/// Segment size of `__consumer_offsets` partitions: small, so a restart replays little.
pub const OFFSETS_SEGMENT_BYTES: u64 = 100 << 20;

/// Whether `topic` is one of the broker's own.
pub fn is_internal(topic: &str) -> bool {
    topic == OFFSETS_TOPIC
}

/// Java's `String.hashCode` (UTF-16 code units, wrapping), which Kafka uses to place groups.
pub fn java_string_hash(value: &str) -> i32 {
    value
        .encode_utf16()
        .fold(0i32, |hash, unit| hash.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The `__consumer_offsets` partition that holds `group` (Kafka: `abs(hashCode) % 50`).
pub fn partition_for_group(group: &str) -> i32 {
    let hash = java_string_hash(group);
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive % OFFSETS_TOPIC_PARTITIONS
}

/// The records that create the internal topics an image lacks (none when it has them all).
pub fn missing_internal_topics(
    image: &MetadataImage,
    policy: PlacementPolicy,
    topic_id: TopicId,
) -> Vec<MetadataRecord> {
    if image.topic(OFFSETS_TOPIC).is_some() {
        return Vec::new();
    }
    let mut configs = BTreeMap::new();
    // Offsets are kept until deleted (the coordinator expires and compacts them itself).
    configs.insert("retention.ms".to_string(), "-1".to_string());
    configs.insert("segment.bytes".to_string(), OFFSETS_SEGMENT_BYTES.to_string());
    let create = CreateTopic {
        name: OFFSETS_TOPIC.to_string(),
        partitions: OFFSETS_TOPIC_PARTITIONS,
        configs,
        validate_only: false,
    };
    // The definition above is valid by construction; a failure here is a bug.
    create_topic(image, &create, policy, topic_id)
        .unwrap_or_else(|error| panic!("the offsets topic definition is invalid: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_land_on_the_partition_kafka_would_choose() {
        // Java: "my-group".hashCode() == -1906497762 → abs % 50 == 12.
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
        assert_eq!(partition_for_group("my-group"), 12);
        assert_eq!(java_string_hash(""), 0);
        assert!((0..OFFSETS_TOPIC_PARTITIONS).contains(&partition_for_group("ünïcode-group")));
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
