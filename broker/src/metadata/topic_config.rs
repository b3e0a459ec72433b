//! Topic names and topic configs: Kafka's naming rule, the configs strata understands with
//! their defaults (Kafka's, or the broker's `log.*` settings), validation, and the mapping of a
//! topic's configs to the storage engine's `LogConfig`.
//! References: Kafka topic-name rules (`Topic.validate`), topic configs documentation.

use super::image::TopicImage;
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

/// Topic configs strata understands, with Kafka's defaults.
pub const TOPIC_CONFIG_KEYS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("delete.retention.ms", "86400000"),
    ("retention.ms", "604800000"),
    ("retention.bytes", "-1"),
    ("segment.bytes", "1073741824"),
    ("segment.ms", "604800000"),
    ("max.message.bytes", "1048588"),
    ("index.interval.bytes", "4096"),
    ("flush.policy", "always"),
    ("message.timestamp.type", "CreateTime"),
    ("message.timestamp.before.max.ms", "9223372036854775807"),
    ("message.timestamp.after.max.ms", "9223372036854775807"),
];

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
    BROKER_TOPIC_DEFAULTS.get().and_then(|defaults| defaults.get(key)).map(String::as_str).or_else(
        || TOPIC_CONFIG_KEYS.iter().find(|(name, _)| *name == key).map(|(_, value)| *value),
    )
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

/// Checks one topic config key and value.
pub fn validate_topic_config(key: &str, value: &str) -> Result<()> {
    match key {
        "retention.ms" => parse_long(key, value, -1, i64::MAX).map(drop),
        "retention.bytes" => parse_long(key, value, -1, i64::MAX).map(drop),
        "segment.bytes" => parse_long(key, value, 14, i64::from(u32::MAX)).map(drop),
        "segment.ms" => parse_long(key, value, 1, i64::MAX).map(drop),
        "max.message.bytes" => {
            parse_long(key, value, 0, shard::config::BATCH_BYTES_MAX as i64).map(drop)
        }
        "index.interval.bytes" => parse_long(key, value, 0, i64::from(i32::MAX)).map(drop),
        "flush.policy" => parse_flush_policy(value).map(drop),
        "cleanup.policy" => parse_cleanup_policy(value).map(drop),
        "delete.retention.ms" => parse_long(key, value, 0, i64::MAX).map(drop),
        "message.timestamp.before.max.ms" | "message.timestamp.after.max.ms" => {
            parse_long(key, value, 0, i64::MAX).map(drop)
        }
        "message.timestamp.type" => match value {
            "CreateTime" | "LogAppendTime" => Ok(()),
            _ => Err(BrokerError::InvalidConfig(format!(
                "message.timestamp.type={value:?}: use CreateTime or LogAppendTime"
            ))),
        },
        _ => Err(BrokerError::InvalidConfig(format!("unknown topic config {key:?}"))),
    }
}

/// The value of `key` for a topic: its override, else the default.
pub fn config_value<'a>(topic: &'a TopicImage, key: &str) -> Option<&'a str> {
    topic.configs.get(key).map(String::as_str).or_else(|| default_config(key))
}

/// The storage engine settings for a topic's partitions.
pub fn log_config(topic: &TopicImage) -> LogConfig {
    let long = |key: &str| -> i64 {
        config_value(topic, key).and_then(|value| value.trim().parse().ok()).unwrap_or(-1)
    };
    let defaults = LogConfig::default();
    let positive = |value: i64| (value >= 0).then_some(value as u64);
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
