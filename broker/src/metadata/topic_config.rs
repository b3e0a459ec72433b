//! Topic names and topic configs: Kafka's naming rule, the configs strata understands with
//! their defaults (Kafka's, or the broker's `log.*` settings), validation, and the mapping of a
//! topic's configs to the storage engine's `LogConfig`.
//! References: Kafka topic-name rules (`Topic.validate`), topic configs documentation.

use super::image::{MetadataImage, TopicImage};
use crate::error::{BrokerError, Result};
use shard::{FlushPolicy, LogConfig};
use std::collections::BTreeMap;

/// Kafka's limit on topic-name length.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;
/// The most partitions one topic may have on this broker.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

/// Kafka's topic-name rule: 1-249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(BrokerError::InvalidTopic(format!("topic name {name:?} is not allowed")));
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return Err(BrokerError::InvalidTopic(format!(
            "topic name is {} characters, the limit is {TOPIC_NAME_BYTES_MAX}",
            name.len()
        )));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return Err(BrokerError::InvalidTopic(format!(
            "topic name {name:?} has characters outside [a-zA-Z0-9._-]"
        )));
    }
    Ok(())
}

/// How a topic config's value is checked.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// An integer within bounds (Kafka's int and long).
    Integer(i64, i64),
    /// A number within bounds (Kafka's double).
    Double(f64, f64),
    Boolean,
    /// One of these values (case-sensitive, as Kafka's ValidString).
    OneOf(&'static [&'static str]),
    /// A comma-separated list (IncrementalAlterConfigs APPEND and SUBTRACT apply to it) of these
    /// items, or of any when empty.
    List(&'static [&'static str]),
    /// Checked by its own parser.
    Own,
}

/// One topic config: Kafka 4.0's (plus strata's `flush.policy`), its default, how its value is
/// checked, and whether strata acts on it (`applied`) or stores and describes it only: a config
/// for a behaviour strata does not have (tiered storage, replication throttles, the cleaner's
/// tuning) is accepted so that tools that set it work, and DescribeConfigs says so.
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigDef {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: Kind,
    pub applied: bool,
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    default: &'static str,
    kind: Kind,
    applied: bool,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef { name, default, kind, applied, doc }
}

const LONG_MAX: i64 = i64::MAX;
const INT_MAX: i64 = i32::MAX as i64;
const ADVISORY: &str = "Stored and described only: strata does not have this behaviour yet.";

/// Every topic config, with Kafka's defaults and ranges (Kafka 4.0 `TopicConfig`/`LogConfig`).
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def("cleanup.policy", "delete", Kind::List(&["compact", "delete"]), true,
        "Applied: delete (retention) and/or compact (the cleaner keeps the newest record per key)."),
    def("compression.gzip.level", "-1", Kind::Own, true,
        "Applied when the broker re-compresses into gzip (1-9, -1 the codec's default)."),
    def("compression.lz4.level", "9", Kind::Integer(1, 17), false,
        "Stored and described only: strata's lz4 encoder has one level."),
    def("compression.type", "producer",
        Kind::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), true,
        "Applied: producer keeps each batch as sent; any other value re-compresses batches in \
         another codec on append."),
    def("compression.zstd.level", "3", Kind::Integer(-131_072, 22), true,
        "Applied when the broker re-compresses into zstd."),
    def("delete.retention.ms", "86400000", Kind::Integer(0, LONG_MAX), true,
        "Applied: how long compaction keeps a tombstone."),
    def("errors.deadletterqueue.group.enable", "false", Kind::Boolean, true,
        "Applied: share groups may write their dead letters (KIP-1191) to this topic."),
    def("file.delete.delay.ms", "60000", Kind::Integer(0, LONG_MAX), false,
        "Stored and described only: strata deletes a segment's files at once."),
    def("flush.messages", "9223372036854775807", Kind::Integer(1, LONG_MAX), false,
        "Stored and described only: strata's durability is set by flush.policy."),
    def("flush.ms", "9223372036854775807", Kind::Integer(0, LONG_MAX), false,
        "Stored and described only: strata's durability is set by flush.policy."),
    def("flush.policy", "always", Kind::Own, true,
        "strata's own: always (fdatasync before acks=all is answered), never, or interval:<ms>."),
    def("follower.replication.throttled.replicas", "", Kind::Own, false, ADVISORY),
    def("index.interval.bytes", "4096", Kind::Integer(0, INT_MAX), true,
        "Applied: bytes between offset index entries."),
    def("leader.replication.throttled.replicas", "", Kind::Own, false, ADVISORY),
    def("local.retention.bytes", "-2", Kind::Integer(-2, LONG_MAX), false,
        "Stored and described only: strata has no tiered storage."),
    def("local.retention.ms", "-2", Kind::Integer(-2, LONG_MAX), false,
        "Stored and described only: strata has no tiered storage."),
    def("max.compaction.lag.ms", "9223372036854775807", Kind::Integer(1, LONG_MAX), false, ADVISORY),
    def("max.message.bytes", "1048588", Kind::Own, true, "Applied: the largest batch accepted."),
    def("message.timestamp.after.max.ms", "3600000", Kind::Integer(0, LONG_MAX), true,
        "Applied: how far ahead of the broker's clock a record's timestamp may be."),
    def("message.timestamp.before.max.ms", "9223372036854775807", Kind::Integer(0, LONG_MAX), true,
        "Applied: how far behind the broker's clock a record's timestamp may be."),
    def("message.timestamp.type", "CreateTime", Kind::OneOf(&["CreateTime", "LogAppendTime"]), true,
        "Applied: CreateTime keeps the producer's times; LogAppendTime stamps batches with the broker's clock."),
    def("min.cleanable.dirty.ratio", "0.5", Kind::Double(0.0, 1.0), false, ADVISORY),
    def("min.compaction.lag.ms", "0", Kind::Integer(0, LONG_MAX), false, ADVISORY),
    def("min.insync.replicas", "1", Kind::Integer(1, INT_MAX), true,
        "Applied: acks=all is refused (NOT_ENOUGH_REPLICAS) while fewer replicas are in sync."),
    def("preallocate", "false", Kind::Boolean, true,
        "Applied: true reserves a new segment's whole segment.bytes on disk at once; false (the default) reserves ahead in steps that grow with the partition's write rate."),
    def("remote.log.copy.disable", "false", Kind::Boolean, false,
        "Stored and described only: strata has no tiered storage."),
    def("remote.log.delete.on.disable", "false", Kind::Boolean, false,
        "Stored and described only: strata has no tiered storage."),
    def("remote.storage.enable", "false", Kind::Own, false,
        "strata has no tiered storage: only false is accepted."),
    def("retention.bytes", "-1", Kind::Integer(-1, LONG_MAX), true,
        "Applied: the most bytes a partition keeps (-1: no limit)."),
    def("retention.ms", "604800000", Kind::Integer(-1, LONG_MAX), true,
        "Applied: how long records are kept (-1: forever)."),
    def("segment.bytes", "1073741824", Kind::Own, true, "Applied: the size a segment rolls at."),
    def("segment.index.bytes", "10485760", Kind::Integer(4, INT_MAX), false,
        "Stored and described only: strata's index files grow as needed."),
    def("segment.jitter.ms", "0", Kind::Integer(0, LONG_MAX), false, ADVISORY),
    def("segment.ms", "604800000", Kind::Integer(1, LONG_MAX), true,
        "Applied: the age a segment rolls at."),
    def("unclean.leader.election.enable", "false", Kind::Boolean, true,
        "Applied: a live replica outside the ISR may lead when no in-sync replica is live."),
];

impl TopicConfigDef {
    /// Kafka's DescribeConfigs `config_type` (v3+): 1 boolean, 2 string, 3 int, 5 long,
    /// 6 double, 7 list.
    pub fn config_type(&self) -> i8 {
        match (self.name, self.kind) {
            // Kafka's int configs (the other integers are long).
            (
                "compression.gzip.level"
                | "compression.lz4.level"
                | "compression.zstd.level"
                | "index.interval.bytes"
                | "max.message.bytes"
                | "min.insync.replicas"
                | "segment.bytes"
                | "segment.index.bytes",
                _,
            ) => 3,
            ("remote.storage.enable", _) => 1,
            ("flush.policy", _) => 2,
            (_, Kind::Own | Kind::List(_)) => 7,
            (_, Kind::Integer(..)) => 5,
            (_, Kind::Double(..)) => 6,
            (_, Kind::Boolean) => 1,
            (_, Kind::OneOf(_)) => 2,
        }
    }
}

/// The definition of a topic config.
pub fn topic_config(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|config| config.name == name)
}

/// Whether a topic config's value is a list (IncrementalAlterConfigs APPEND and SUBTRACT).
pub fn is_list_config(name: &str) -> bool {
    matches!(topic_config(name).map(|config| config.kind), Some(Kind::List(_)))
        || name.ends_with(".replication.throttled.replicas")
}

/// Broker-wide topic defaults from the configuration (`log.retention.ms`, ...), set once at
/// startup before any shard runs and only read afterwards.
static BROKER_TOPIC_DEFAULTS: std::sync::OnceLock<BTreeMap<String, String>> =
    std::sync::OnceLock::new();

/// Installs the broker's topic defaults (once, at startup).
pub fn set_broker_topic_defaults(defaults: BTreeMap<String, String>) {
    let _ = BROKER_TOPIC_DEFAULTS.set(defaults);
}

/// A topic config's default: the broker's setting, else Kafka's default.
pub fn default_config(key: &str) -> Option<&'static str> {
    BROKER_TOPIC_DEFAULTS
        .get()
        .and_then(|defaults| defaults.get(key))
        .map(String::as_str)
        .or_else(|| topic_config(key).map(|config| config.default))
}

fn parse_long(key: &str, value: &str, min: i64, max: i64) -> Result<i64> {
    let parsed: i64 = value
        .trim()
        .parse()
        .map_err(|_| BrokerError::InvalidConfig(format!("{key}={value:?} is not an integer")))?;
    if parsed < min || parsed > max {
        return Err(BrokerError::InvalidConfig(format!("{key}={parsed} is outside {min}..={max}")));
    }
    Ok(parsed)
}

/// Parses `cleanup.policy`: `delete`, `compact`, or both (comma-separated, as Kafka's list):
/// (delete, compact).
pub fn parse_cleanup_policy(value: &str) -> Result<(bool, bool)> {
    let mut policy = (false, false);
    for part in value.split(',').map(str::trim) {
        match part {
            "delete" => policy.0 = true,
            "compact" => policy.1 = true,
            _ => {
                return Err(BrokerError::InvalidConfig(format!(
                    "cleanup.policy={value:?}: use delete, compact or compact,delete"
                )))
            }
        }
    }
    Ok(policy)
}

/// Parses `flush.policy`: `always`, `never`, or `interval:<ms>`.
pub fn parse_flush_policy(value: &str) -> Result<FlushPolicy> {
    match value.trim() {
        "always" => Ok(FlushPolicy::Always),
        "never" => Ok(FlushPolicy::Never),
        other => match other.strip_prefix("interval:").map(|ms| ms.parse::<u64>()) {
            Some(Ok(ms)) if ms > 0 => Ok(FlushPolicy::IntervalMs(ms)),
            _ => Err(BrokerError::InvalidConfig(format!(
                "flush.policy={other:?}: use always, never or interval:<ms>"
            ))),
        },
    }
}

/// `leader/follower.replication.throttled.replicas`: `*`, or `partition:broker` pairs.
fn parse_throttled_replicas(key: &str, value: &str) -> Result<()> {
    let value = value.trim();
    let pair = |item: &str| {
        let mut parts = item.trim().split(':');
        let valid = |part: Option<&str>| part.is_some_and(|p| p.trim().parse::<u32>().is_ok());
        valid(parts.next()) && valid(parts.next()) && parts.next().is_none()
    };
    if value.is_empty() || value == "*" || value.split(',').all(pair) {
        return Ok(());
    }
    Err(BrokerError::InvalidConfig(format!(
        "{key}={value:?}: use * or [partition]:[broker],[partition]:[broker],..."
    )))
}

/// Checks one topic config key and value (Kafka's INVALID_CONFIG for an unknown key, a value
/// of the wrong type, or one out of range).
pub fn validate_topic_config(key: &str, value: &str) -> Result<()> {
    let config = topic_config(key)
        .ok_or_else(|| BrokerError::InvalidConfig(format!("Unknown topic config name: {key}")))?;
    match (key, config.kind) {
        ("cleanup.policy", _) => parse_cleanup_policy(value).map(drop),
        ("flush.policy", _) => parse_flush_policy(value).map(drop),
        ("segment.bytes", _) => parse_long(key, value, 14, i64::from(u32::MAX)).map(drop),
        ("max.message.bytes", _) => {
            parse_long(key, value, 0, shard::config::BATCH_BYTES_MAX as i64).map(drop)
        }
        ("compression.gzip.level", _) => match parse_long(key, value, -1, 9)? {
            0 => Err(BrokerError::InvalidConfig(format!("{key}=0: use 1-9 or -1"))),
            _ => Ok(()),
        },
        ("remote.storage.enable", _) => match value.trim() {
            "false" => Ok(()),
            "true" => Err(BrokerError::InvalidConfig(
                "Tiered Storage functionality is disabled in the broker. Topic cannot be \
                 configured with remote log storage."
                    .into(),
            )),
            other => Err(BrokerError::InvalidConfig(format!("{key}={other:?}: use true or false"))),
        },
        (_, Kind::Own) => parse_throttled_replicas(key, value),
        (_, Kind::Integer(min, max)) => parse_long(key, value, min, max).map(drop),
        (_, Kind::Double(min, max)) => match value.trim().parse::<f64>() {
            Ok(number) if (min..=max).contains(&number) => Ok(()),
            _ => Err(BrokerError::InvalidConfig(format!(
                "{key}={value:?}: a number in {min}..={max}"
            ))),
        },
        (_, Kind::Boolean) => match value.trim() {
            "true" | "false" => Ok(()),
            other => Err(BrokerError::InvalidConfig(format!("{key}={other:?}: use true or false"))),
        },
        (_, Kind::OneOf(values)) => match values.contains(&value.trim()) {
            true => Ok(()),
            false => Err(BrokerError::InvalidConfig(format!(
                "{key}={value:?}: use one of {}",
                values.join(", ")
            ))),
        },
        (_, Kind::List(items)) => {
            let bad = value
                .split(',')
                .map(str::trim)
                .find(|item| !item.is_empty() && !items.is_empty() && !items.contains(item));
            match bad {
                None => Ok(()),
                Some(item) => Err(BrokerError::InvalidConfig(format!(
                    "{key}: {item:?} is not one of {}",
                    items.join(", ")
                ))),
            }
        }
    }
}

/// Checks a topic's overrides together (Kafka's cross-field rules).
pub fn validate_topic_configs(configs: &BTreeMap<String, String>) -> Result<()> {
    for (key, value) in configs {
        validate_topic_config(key, value)?;
    }
    let long = |key: &str| -> i64 {
        configs
            .get(key)
            .map(String::as_str)
            .or_else(|| default_config(key))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    };
    if long("min.compaction.lag.ms") > long("max.compaction.lag.ms") {
        return Err(BrokerError::InvalidConfig(format!(
            "conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({})",
            long("min.compaction.lag.ms"),
            long("max.compaction.lag.ms")
        )));
    }
    Ok(())
}

/// The codec `compression.type` re-compresses into, or `None` for `producer` (keep each batch
/// as sent).
pub fn compression_target(value: &str) -> Option<wire::Compression> {
    match value.trim() {
        "uncompressed" => Some(wire::Compression::None),
        "gzip" => Some(wire::Compression::Gzip),
        "snappy" => Some(wire::Compression::Snappy),
        "lz4" => Some(wire::Compression::Lz4),
        "zstd" => Some(wire::Compression::Zstd),
        _ => None,
    }
}

/// The value of `key` for a topic: its override, else the static default.
pub fn config_value<'a>(topic: &'a TopicImage, key: &str) -> Option<&'a str> {
    topic.configs.get(key).map(String::as_str).or_else(|| default_config(key))
}

/// Where a topic config's value comes from (DescribeConfigs sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueSource {
    Topic,
    DynamicBroker,
    DynamicDefaultBroker,
    Default,
}

/// The value of `key` for a topic on `node`, and where it comes from: its override, else the
/// dynamic broker default (this broker's, then the cluster's), else the static default.
pub fn effective_config<'a>(
    image: &'a MetadataImage,
    node: i32,
    topic: &'a TopicImage,
    key: &str,
) -> (Option<&'a str>, ValueSource) {
    if let Some(value) = topic.configs.get(key) {
        return (Some(value), ValueSource::Topic);
    }
    if let Some(broker_key) = super::broker_config::broker_synonym(key) {
        let own = image.broker_configs.get(&node.to_string()).and_then(|c| c.get(broker_key));
        if let Some(value) = own {
            return (Some(value), ValueSource::DynamicBroker);
        }
        if let Some(value) = image.broker_configs.get("").and_then(|c| c.get(broker_key)) {
            return (Some(value), ValueSource::DynamicDefaultBroker);
        }
    }
    (default_config(key), ValueSource::Default)
}

/// The storage engine settings for a topic's partitions on `node` (its overrides, then the
/// dynamic broker defaults, then the static ones).
pub fn log_config_on(image: &MetadataImage, node: i32, topic: &TopicImage) -> LogConfig {
    if image.broker_configs.is_empty() {
        return log_config(topic);
    }
    let mut resolved = topic.clone();
    for def in TOPIC_CONFIGS {
        if let (Some(value), ValueSource::DynamicBroker | ValueSource::DynamicDefaultBroker) =
            effective_config(image, node, topic, def.name)
        {
            resolved.configs.insert(def.name.to_string(), value.to_string());
        }
    }
    log_config(&resolved)
}

/// The storage engine settings for a topic's partitions (its overrides, then the static
/// defaults).
pub fn log_config(topic: &TopicImage) -> LogConfig {
    let long = |key: &str| -> i64 {
        config_value(topic, key).and_then(|value| value.trim().parse().ok()).unwrap_or(-1)
    };
    let defaults = LogConfig::default();
    let positive = |value: i64| (value >= 0).then_some(value as u64);
    let compression = config_value(topic, "compression.type").and_then(compression_target);
    let cleanup = config_value(topic, "cleanup.policy")
        .and_then(|value| parse_cleanup_policy(value).ok())
        .unwrap_or((true, false));
    LogConfig {
        segment_bytes: positive(long("segment.bytes")).unwrap_or(defaults.segment_bytes),
        segment_ms: positive(long("segment.ms"))
            .filter(|ms| *ms > 0)
            .unwrap_or(defaults.segment_ms),
        retention_ms: positive(long("retention.ms")),
        retention_bytes: positive(long("retention.bytes")),
        index_interval_bytes: positive(long("index.interval.bytes"))
            .filter(|bytes| *bytes > 0)
            .unwrap_or(defaults.index_interval_bytes),
        max_message_bytes: positive(long("max.message.bytes"))
            .map(|bytes| bytes as usize)
            .filter(|bytes| *bytes > 0)
            .unwrap_or(defaults.max_message_bytes),
        flush: config_value(topic, "flush.policy")
            .and_then(|value| parse_flush_policy(value).ok())
            .unwrap_or(FlushPolicy::Always),
        write_chunk_bytes: defaults.write_chunk_bytes,
        cleanup_delete: cleanup.0,
        cleanup_compact: cleanup.1,
        delete_retention_ms: positive(long("delete.retention.ms"))
            .unwrap_or(defaults.delete_retention_ms),
        timestamp_before_max_ms: Some(long("message.timestamp.before.max.ms"))
            .filter(|ms| *ms >= 0)
            .unwrap_or(defaults.timestamp_before_max_ms),
        timestamp_after_max_ms: Some(long("message.timestamp.after.max.ms"))
            .filter(|ms| *ms >= 0)
            .unwrap_or(defaults.timestamp_after_max_ms),
        log_append_time: config_value(topic, "message.timestamp.type") == Some("LogAppendTime"),
        preallocate: config_value(topic, "preallocate") == Some("true"),
        compression,
        compression_level: match compression {
            Some(wire::Compression::Gzip) => {
                Some(long("compression.gzip.level")).filter(|l| *l > 0)
            }
            Some(wire::Compression::Zstd) => Some(long("compression.zstd.level")),
            _ => None,
        }
        .map(|level| level as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafkas_rule() {
        assert!(validate_topic_name("orders.v1_eu-west").is_ok());
        for bad in ["", ".", "..", "bad/name", "spaces here", &"x".repeat(250)] {
            assert!(matches!(validate_topic_name(bad), Err(BrokerError::InvalidTopic(_))), "{bad}");
        }
    }

    #[test]
    fn configs_are_validated_and_mapped_to_the_log_config() {
        assert!(validate_topic_config("retention.ms", "1000").is_ok());
        assert!(validate_topic_config("retention.ms", "abc").is_err());
        assert!(validate_topic_config("segment.bytes", "10").is_err());
        assert!(validate_topic_config("no.such.key", "1").is_err());
        assert!(validate_topic_config("flush.policy", "interval:50").is_ok());
        assert!(validate_topic_config("flush.policy", "sometimes").is_err());
        let mut topic = TopicImage {
            name: "t".into(),
            topic_id: [0; 16],
            partitions: Vec::new(),
            configs: BTreeMap::new(),
        };
        assert_eq!(log_config(&topic).retention_ms, Some(604_800_000));
        assert_eq!(log_config(&topic).flush, FlushPolicy::Always);
        topic.configs.insert("retention.ms".into(), "-1".into());
        topic.configs.insert("flush.policy".into(), "never".into());
        topic.configs.insert("max.message.bytes".into(), "2000".into());
        let config = log_config(&topic);
        assert_eq!(config.retention_ms, None);
        assert_eq!(config.flush, FlushPolicy::Never);
        assert_eq!(config.max_message_bytes, 2000);
    }
}
