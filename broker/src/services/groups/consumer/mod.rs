//! KIP-848 consumer groups (`group.protocol=consumer`): the broker computes the assignment
//! (`assignors`) and members reconcile to it incrementally through ConsumerGroupHeartbeat.
//!
//! Pure, no I/O and no clock of its own (every step takes `now_ms`), so a seeded model test
//! drives it: `heartbeat` and `leave`/`fence` turn a request into the records to append to
//! `__consumer_offsets` and the answer; the coordinator appends them (acks=all) and only then
//! applies them with `ConsumerGroup::apply`, so nothing is visible that is not durable.
//! Invariants: a partition is in at most one member's assigned or pending-revocation set
//! (asserted in `apply`); member epoch ≤ group epoch; assignment epoch ≤ group epoch.
//! Runs on: the shard coordinating the group.
//! References: KIP-848; Kafka `GroupMetadataManager.consumerGroupHeartbeat`,
//! `CurrentAssignmentBuilder`, `TargetAssignmentBuilder` (4.x).

pub mod classic;
pub mod group;
pub mod heartbeat;
pub mod reconcile;
pub mod records;
pub mod regex;

pub use group::{ConsumerGroup, GroupState, Member};
pub use heartbeat::{fence, heartbeat, leave, HeartbeatAnswer, HeartbeatRequest, Step};
pub use records::{MemberState, Partitions, Record, TopicId};

use super::assignors::Assignor;

/// Kafka's `group.consumer.session.timeout.ms` default.
pub const SESSION_TIMEOUT_MS_DEFAULT: i32 = 45_000;
/// strata's `group.consumer.heartbeat.interval.ms` default (Kafka's is 5,000 ms: members learn
/// of a rebalance at their next heartbeat, so this bounds how soon it starts; a heartbeat that
/// changes nothing writes nothing, so the cost is one small request per member every 2 s).
pub const HEARTBEAT_INTERVAL_MS_DEFAULT: i32 = 2_000;
/// Kafka's `group.consumer.max.size` is unlimited (i32::MAX); strata bounds it as the
/// classic protocol's group size.
pub const MEMBERS_MAX_DEFAULT: usize = 1000;

/// Kafka's `group.consumer.migration.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }

    pub fn upgrades(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade)
    }

    pub fn downgrades(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade)
    }
}

/// The coordinator's settings for consumer groups (Kafka's `group.consumer.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub members_max: usize,
    /// The assignors the broker offers; the first is the default.
    pub assignors: Vec<Assignor>,
    pub migration_policy: MigrationPolicy,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            session_timeout_ms: SESSION_TIMEOUT_MS_DEFAULT,
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS_DEFAULT,
            members_max: MEMBERS_MAX_DEFAULT,
            assignors: Assignor::ALL.to_vec(),
            migration_policy: MigrationPolicy::Bidirectional,
        }
    }
}

impl ConsumerConfig {
    /// This config with a group's own group configs (`consumer.session.timeout.ms`,
    /// `consumer.heartbeat.interval.ms`, checked when they were set) in place of the broker's.
    pub fn for_group(
        &self,
        overrides: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Self {
        let mut config = self.clone();
        let value = |key: &str| overrides.and_then(|o| o.get(key)).and_then(|v| v.parse().ok());
        if let Some(ms) = value("consumer.session.timeout.ms") {
            config.session_timeout_ms = ms;
        }
        if let Some(ms) = value("consumer.heartbeat.interval.ms") {
            config.heartbeat_interval_ms = ms;
        }
        config
    }

    /// From the broker's `group.consumer.*` keys (checked there).
    pub fn from_settings(settings: &crate::config::ConsumerGroupSettings) -> Self {
        ConsumerConfig {
            session_timeout_ms: settings.session_timeout_ms,
            heartbeat_interval_ms: settings.heartbeat_interval_ms,
            members_max: settings.max_size,
            assignors: settings.assignors.iter().filter_map(|a| Assignor::from_name(a)).collect(),
            migration_policy: MigrationPolicy::from_name(&settings.migration_policy)
                .unwrap_or(MigrationPolicy::Bidirectional),
        }
    }
}

/// What the group needs of the cluster's topics (the metadata image; a map in tests).
pub trait Topics {
    /// The id and partition count of a topic.
    fn by_name(&self, name: &str) -> Option<(TopicId, i32)>;
    /// Every topic name (regex subscriptions are matched against them).
    fn names(&self) -> Vec<String>;
    /// Changes whenever topics may have changed (the image's version).
    fn version(&self) -> u64;
}

/// Topics as a map, for tests and tools: name → (id, partitions), with a version.
#[derive(Debug, Clone, Default)]
pub struct TopicMap {
    pub topics: std::collections::BTreeMap<String, (TopicId, i32)>,
    pub version: u64,
}

impl Topics for TopicMap {
    fn by_name(&self, name: &str) -> Option<(TopicId, i32)> {
        self.topics.get(name).copied()
    }

    fn names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }

    fn version(&self) -> u64 {
        self.version
    }
}

impl Topics for crate::metadata::image::MetadataImage {
    fn by_name(&self, name: &str) -> Option<(TopicId, i32)> {
        self.topic(name).map(|topic| (topic.topic_id, topic.partition_count()))
    }

    fn names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }

    fn version(&self) -> u64 {
        self.version
    }
}
