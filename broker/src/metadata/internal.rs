//! Internal topics: `__consumer_offsets` (committed offsets and group metadata) and
//! `__transaction_state` (transaction coordinators' records), created at a single node's first
//! start, and the placement of a consumer group or transactional id on one of their partitions.
//! References: Kafka `GroupCoordinator.partitionFor` (`abs(hashCode) % offsets.topic.num.partitions`).

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's `offsets.topic.num.partitions` default.
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;
/// Segment size of `__consumer_offsets` partitions: small, so a restart replays little.
pub const OFFSETS_SEGMENT_BYTES: u64 = 100 << 20;

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
/// Kafka's `transaction.state.log.num.partitions` default.
pub const TRANSACTION_STATE_PARTITIONS: i32 = 50;

/// The share coordinators' topic (KIP-932): share partitions' delivery state.
pub const SHARE_STATE_TOPIC: &str = "__share_group_state";
/// Kafka's `share.coordinator.state.topic.num.partitions` default.
pub const SHARE_STATE_PARTITIONS: i32 = 50;

/// Whether `topic` is one of the broker's own.
pub fn is_internal(topic: &str) -> bool {
    topic == OFFSETS_TOPIC || topic == TRANSACTION_STATE_TOPIC || topic == SHARE_STATE_TOPIC
}

/// The `__share_group_state` partition that holds a share partition's state: Kafka's
/// `abs(hashCode) % 50` of `"<group>:<topic id>:<partition>"`, the topic id as Kafka prints a
/// `Uuid` (URL-safe base64 without padding; `SharePartitionKey.asCoordinatorKey`).
pub fn partition_for_share_state(group: &str, topic_id: &[u8; 16], partition: i32) -> i32 {
    let key = format!("{group}:{}:{partition}", uuid_base64(topic_id));
    let hash = java_string_hash(&key);
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive % SHARE_STATE_PARTITIONS
}

/// A topic id as Kafka's `Uuid.toString`: URL-safe base64 of its 16 bytes, unpadded.
pub fn uuid_base64(id: &[u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

/// The `__transaction_state` partition that holds `transactional_id` (Kafka:
/// `abs(hashCode) % transaction.state.log.num.partitions`).
pub fn partition_for_transactional_id(transactional_id: &str) -> i32 {
    let hash = java_string_hash(transactional_id);
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive % TRANSACTION_STATE_PARTITIONS
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
}
