//! Dynamic broker configs: what AlterConfigs and IncrementalAlterConfigs may set on the BROKER
//! resource, per broker (resource name = node id) or as the cluster-wide default (empty name),
//! as Kafka 4.0 allows (`DynamicBrokerConfig.AllDynamicConfigs`).
//!
//! A dynamic config that is the broker default of a topic config (`log.retention.ms` for
//! `retention.ms`, ...) takes effect at once on every topic without its own override: it sits
//! between the topic's override and the static setting (per broker, then cluster default, then
//! the configuration file, then Kafka's default). The others are stored, persisted and
//! described: strata has no thread pools, quotas or cleaner tuning to reconfigure.
//! References: Kafka `DynamicBrokerConfig`, `ConfigAdminManager.preprocess`, KIP-226.

/// Dynamic broker configs that set a topic config's default: (broker key, topic key).
pub const TOPIC_DEFAULT_SYNONYMS: &[(&str, &str)] = &[
    ("log.cleanup.policy", "cleanup.policy"),
    ("compression.type", "compression.type"),
    ("compression.gzip.level", "compression.gzip.level"),
    ("compression.lz4.level", "compression.lz4.level"),
    ("compression.zstd.level", "compression.zstd.level"),
    ("log.cleaner.delete.retention.ms", "delete.retention.ms"),
    ("log.segment.delete.delay.ms", "file.delete.delay.ms"),
    ("log.flush.interval.messages", "flush.messages"),
    ("log.flush.interval.ms", "flush.ms"),
    ("log.index.interval.bytes", "index.interval.bytes"),
    ("log.local.retention.bytes", "local.retention.bytes"),
    ("log.local.retention.ms", "local.retention.ms"),
    ("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms"),
    ("message.max.bytes", "max.message.bytes"),
    ("log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms"),
    ("log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms"),
    ("log.message.timestamp.type", "message.timestamp.type"),
    ("log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio"),
    ("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"),
    ("min.insync.replicas", "min.insync.replicas"),
    ("log.preallocate", "preallocate"),
    ("log.retention.bytes", "retention.bytes"),
    ("log.retention.ms", "retention.ms"),
    ("log.segment.bytes", "segment.bytes"),
    ("log.index.size.max.bytes", "segment.index.bytes"),
    ("log.roll.jitter.ms", "segment.jitter.ms"),
    ("log.roll.ms", "segment.ms"),
    ("unclean.leader.election.enable", "unclean.leader.election.enable"),
    ("log.flush.policy", "flush.policy"),
];

/// Kafka's other cluster-wide dynamic configs (stored and described only).
const CLUSTER_WIDE: &[&str] = &[
    "background.threads",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "log.cleaner.threads",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second",
    "max.connections",
    "max.connection.creation.rate",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "metric.reporters",
    "producer.id.expiration.ms",
    "transaction.partition.verification.enable",
    "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.expiration.thread.pool.size",
    "remote.log.reader.threads",
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

/// Per-broker-only dynamic configs (listeners and security), by name or prefix.
const PER_BROKER_ONLY: &[&str] =
    &["listeners", "listener.security.protocol.map", "principal.builder.class"];
const PER_BROKER_ONLY_PREFIXES: &[&str] = &["ssl.", "sasl.", "listener.name."];

/// How a broker config may be changed at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dynamic {
    /// Sets this topic config's default.
    TopicDefault(&'static str),
    /// Cluster-wide capable, stored and described.
    Stored,
    /// Only per broker (resource = a node id), stored and described.
    PerBrokerOnly,
    /// Not a config this broker knows: Kafka accepts custom keys on the BROKER resource.
    Custom,
    /// A static broker config: not changeable at run time.
    ReadOnly,
}

/// How `key` may be changed at run time (`static_key`: the broker has it as a static setting).
pub fn dynamic(key: &str, static_key: bool) -> Dynamic {
    if let Some((_, topic_key)) = TOPIC_DEFAULT_SYNONYMS.iter().find(|(name, _)| *name == key) {
        return Dynamic::TopicDefault(topic_key);
    }
    if CLUSTER_WIDE.contains(&key) {
        return Dynamic::Stored;
    }
    if PER_BROKER_ONLY.contains(&key) || PER_BROKER_ONLY_PREFIXES.iter().any(|p| key.starts_with(p))
    {
        return Dynamic::PerBrokerOnly;
    }
    if static_key {
        Dynamic::ReadOnly
    } else {
        Dynamic::Custom
    }
}

/// The dynamic broker key that sets `topic_key`'s default, if any.
pub fn broker_synonym(topic_key: &str) -> Option<&'static str> {
    TOPIC_DEFAULT_SYNONYMS.iter().find(|(_, topic)| *topic == topic_key).map(|(broker, _)| *broker)
}

/// Every dynamic broker config name Kafka allows at the cluster level or per broker (for
/// DescribeConfigs of the BROKER resource).
pub fn dynamic_names() -> impl Iterator<Item = &'static str> {
    TOPIC_DEFAULT_SYNONYMS.iter().map(|(broker, _)| *broker).chain(CLUSTER_WIDE.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_kafka() {
        assert_eq!(dynamic("log.retention.ms", true), Dynamic::TopicDefault("retention.ms"));
        assert_eq!(dynamic("num.io.threads", false), Dynamic::Stored);
        assert_eq!(dynamic("ssl.keystore.location", false), Dynamic::PerBrokerOnly);
        assert_eq!(dynamic("log.dirs", true), Dynamic::ReadOnly);
        assert_eq!(dynamic("my.custom.key", false), Dynamic::Custom);
        assert_eq!(broker_synonym("segment.ms"), Some("log.roll.ms"));
    }
}
