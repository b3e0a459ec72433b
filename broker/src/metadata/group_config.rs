//! Group configs (KIP-848's GROUP config resource, type 32): per-group overrides of the group
//! coordinator's settings, set with IncrementalAlterConfigs or AlterConfigs and read with
//! DescribeConfigs, as Kafka 4.x does. They are metadata (`MetadataRecord::GroupConfig`,
//! `MetadataImage::group_configs`), so every broker, whichever coordinates the group, reads
//! the same values; a group need not exist to have them (Kafka keeps them apart from groups).
//! The keys are Kafka's (`GroupConfig.java`, 4.2, with 4.3's share delivery limit and record
//! locks and 4.4's dead-letter queue, KIP-1191), each checked here.
//! References: Kafka `GroupConfig.java`; the group-configs documentation.

use crate::error::{BrokerError, Result};
use std::collections::BTreeMap;

/// How a group config's value is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer within bounds.
    Integer(i64, i64),
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// `latest`, `earliest` or `by_duration:<ISO-8601 duration>` (share.auto.offset.reset).
    OffsetReset,
    Boolean,
    /// A topic name, or empty for none.
    TopicName,
}

/// A group config: its name, how it is checked, and its default when the broker has no
/// setting of its own for it (`None`: the broker's, see `default_of`).
#[derive(Debug, Clone, Copy)]
pub struct GroupConfigDef {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Option<&'static str>,
    pub doc: &'static str,
}

/// Every group config strata takes (sorted by name).
pub const GROUP_CONFIGS: &[GroupConfigDef] = &[
    GroupConfigDef { name: "consumer.heartbeat.interval.ms", kind: Kind::Integer(100, 3_600_000), default: None, doc: "The heartbeat interval given to this consumer group's members (group.consumer.heartbeat.interval.ms)." },
    GroupConfigDef { name: "consumer.session.timeout.ms", kind: Kind::Integer(1_000, 1_800_000), default: None, doc: "How long this consumer group's members may go without a heartbeat (group.consumer.session.timeout.ms)." },
    GroupConfigDef { name: "errors.deadletterqueue.copy.record.enable", kind: Kind::Boolean, default: Some("false"), doc: "Share groups (KIP-1191): copy an archived record's key and value into the dead-letter record, not only its coordinates." },
    GroupConfigDef { name: "errors.deadletterqueue.topic.name", kind: Kind::TopicName, default: Some(""), doc: "Share groups (KIP-1191): the topic that receives records archived at the delivery limit (empty: none)." },
    GroupConfigDef { name: "share.auto.offset.reset", kind: Kind::OffsetReset, default: Some("latest"), doc: "Where a share group starts reading a partition it has no state for: latest, earliest or by_duration:<duration>." },
    GroupConfigDef { name: "share.delivery.count.limit", kind: Kind::Integer(2, 10), default: Some("5"), doc: "Share groups: deliveries of a record before it is archived." },
    GroupConfigDef { name: "share.heartbeat.interval.ms", kind: Kind::Integer(1_000, 15_000), default: Some("2000"), doc: "The heartbeat interval given to this share group's members." },
    GroupConfigDef { name: "share.isolation.level", kind: Kind::OneOf(&["read_uncommitted", "read_committed"]), default: Some("read_uncommitted"), doc: "Whether a share group reads records of open and aborted transactions." },
    GroupConfigDef { name: "share.partition.max.record.locks", kind: Kind::Integer(100, 10_000), default: Some("2000"), doc: "Share groups: records of one partition acquired at once, at most." },
    GroupConfigDef { name: "share.record.lock.duration.ms", kind: Kind::Integer(1_000, 3_600_000), default: Some("30000"), doc: "How long a share consumer holds an acquired record before it is offered again." },
    GroupConfigDef { name: "share.session.timeout.ms", kind: Kind::Integer(1_000, 1_800_000), default: Some("45000"), doc: "How long this share group's members may go without a heartbeat." },
];

pub fn find(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|def| def.name == name)
}

fn invalid(why: String) -> BrokerError {
    BrokerError::InvalidConfig(why)
}

/// Checks one value of a group config.
pub fn validate(name: &str, value: &str) -> Result<()> {
    let def = find(name).ok_or_else(|| invalid(format!("Unknown group config name: {name}")))?;
    let bad = || invalid(format!("Invalid value {value} for configuration {name}"));
    match def.kind {
        Kind::Integer(min, max) => {
            let number: i64 = value.trim().parse().map_err(|_| bad())?;
            if !(min..=max).contains(&number) {
                return Err(invalid(format!(
                    "Invalid value {value} for configuration {name}: Value must be at least {min} and at most {max}"
                )));
            }
        }
        Kind::OneOf(words) => {
            if !words.contains(&value.trim()) {
                return Err(invalid(format!(
                    "Invalid value {value} for configuration {name}: String must be one of: {}",
                    words.join(", ")
                )));
            }
        }
        Kind::OffsetReset => match value.trim() {
            "latest" | "earliest" => {}
            other => {
                let duration = other.strip_prefix("by_duration:").ok_or_else(bad)?;
                if !valid_duration(duration) {
                    return Err(bad());
                }
            }
        },
        Kind::Boolean => {
            if !matches!(value.trim(), "true" | "false") {
                return Err(bad());
            }
        }
        Kind::TopicName => {
            if !value.is_empty() {
                super::topic_config::validate_topic_name(value).map_err(|_| bad())?;
                // KIP-1191: never an internal topic.
                if value.starts_with("__") {
                    return Err(bad());
                }
            }
        }
    }
    Ok(())
}

/// An ISO-8601 duration as Java's `Duration.parse` takes it, without a sign:
/// `P[nD][T[nH][nM][n[.n]S]]` with at least one part.
fn valid_duration(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('P').or_else(|| text.strip_prefix('p')) else {
        return false;
    };
    let (days, time) = match rest.split_once(['T', 't']) {
        Some((days, time)) => (days, Some(time)),
        None => (rest, None),
    };
    let number = |part: &str, fraction: bool| {
        let (whole, frac) = part.split_once('.').unwrap_or((part, ""));
        !whole.is_empty()
            && whole.bytes().all(|b| b.is_ascii_digit())
            && (frac.is_empty() || (fraction && frac.bytes().all(|b| b.is_ascii_digit())))
    };
    let days_ok =
        days.is_empty() || days.strip_suffix(['D', 'd']).is_some_and(|n| number(n, false));
    let time_ok = time.is_none_or(|time| {
        let mut rest = time;
        let mut any = false;
        for unit in ['H', 'M', 'S'] {
            if let Some(at) = rest.find([unit, unit.to_ascii_lowercase()]) {
                let (value, after) = rest.split_at(at);
                if !number(value, unit == 'S') {
                    return false;
                }
                rest = after.get(1..).unwrap_or_default();
                any = true;
            }
        }
        any && rest.is_empty()
    });
    (!days.is_empty() || time.is_some()) && days_ok && time_ok
}

/// The milliseconds of `share.auto.offset.reset`'s `by_duration:<duration>` (checked when it
/// was set); `None` for any other value.
pub fn duration_ms(value: &str) -> Option<i64> {
    let duration = value.trim().strip_prefix("by_duration:")?;
    if !valid_duration(duration) {
        return None;
    }
    let upper = duration.to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (days, time) = rest.split_once('T').unwrap_or((rest, ""));
    let mut ms: f64 = 0.0;
    if let Some(days) = days.strip_suffix('D') {
        ms += days.parse::<f64>().ok()? * 86_400_000.0;
    }
    let mut rest = time;
    for (unit, scale) in [('H', 3_600_000.0), ('M', 60_000.0), ('S', 1_000.0)] {
        if let Some(at) = rest.find(unit) {
            let (value, after) = rest.split_at(at);
            ms += value.parse::<f64>().ok()? * scale;
            rest = after.get(1..).unwrap_or_default();
        }
    }
    Some(ms.min(i64::MAX as f64) as i64)
}

/// Checks a group's configs as a whole after an edit: each value, and a consumer group's
/// session timeout longer than its heartbeat interval (with the broker's values for the one
/// not set, `broker_default`).
pub fn validate_all(
    configs: &BTreeMap<String, String>,
    broker_default: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    for (name, value) in configs {
        validate(name, value)?;
    }
    for prefix in ["consumer", "share"] {
        let value = |key: &str| {
            let name = format!("{prefix}.{key}");
            configs.get(&name).cloned().or_else(|| default_of(&name, broker_default))
        };
        let session = value("session.timeout.ms").and_then(|v| v.parse::<i64>().ok());
        let heartbeat = value("heartbeat.interval.ms").and_then(|v| v.parse::<i64>().ok());
        if let (Some(session), Some(heartbeat)) = (session, heartbeat) {
            if session <= heartbeat {
                return Err(invalid(format!(
                    "{prefix}.session.timeout.ms ({session}) must be greater than {prefix}.heartbeat.interval.ms ({heartbeat})"
                )));
            }
        }
    }
    Ok(())
}

/// A group config's value when a group does not set it: the broker's setting for the
/// `consumer.*` keys (`group.consumer.*`), else Kafka's default.
pub fn default_of(name: &str, broker_default: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let def = find(name)?;
    match def.default {
        Some(value) => Some(value.to_string()),
        None => broker_default(&format!("group.{name}")),
    }
}

/// A group's value of `name`: its override, else the default.
pub fn value_of(
    overrides: Option<&BTreeMap<String, String>>,
    name: &str,
    broker_default: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    overrides
        .and_then(|configs| configs.get(name).cloned())
        .or_else(|| default_of(name, broker_default))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(key: &str) -> Option<String> {
        match key {
            "group.consumer.session.timeout.ms" => Some("45000".into()),
            "group.consumer.heartbeat.interval.ms" => Some("2000".into()),
            _ => None,
        }
    }

    #[test]
    fn values_are_checked_as_kafka_checks_them() {
        assert!(validate("consumer.session.timeout.ms", "50000").is_ok());
        assert!(validate("consumer.session.timeout.ms", "5").is_err());
        assert!(validate("consumer.session.timeout.ms", "fifty").is_err());
        assert!(validate("no.such.config", "1").is_err());
        assert!(validate("share.isolation.level", "read_committed").is_ok());
        assert!(validate("share.isolation.level", "serializable").is_err());
        for good in [
            "latest",
            "earliest",
            "by_duration:PT1H",
            "by_duration:P1DT2H30M10.5S",
            "by_duration:P2D",
        ] {
            assert!(validate("share.auto.offset.reset", good).is_ok(), "{good}");
        }
        for bad in [
            "none",
            "by_duration:",
            "by_duration:PT",
            "by_duration:1H",
            "by_duration:PT1X",
            "by_duration:P",
        ] {
            assert!(validate("share.auto.offset.reset", bad).is_err(), "{bad}");
        }
        assert!(validate("share.delivery.count.limit", "11").is_err());
        assert_eq!(duration_ms("by_duration:PT1H"), Some(3_600_000));
        assert_eq!(duration_ms("by_duration:P1DT2M0.5S"), Some(86_400_000 + 120_000 + 500));
        assert_eq!(duration_ms("latest"), None);
        assert!(validate("errors.deadletterqueue.topic.name", "").is_ok());
        assert!(validate("errors.deadletterqueue.topic.name", "dlq.orders").is_ok());
        assert!(validate("errors.deadletterqueue.topic.name", "bad name").is_err());
        assert!(validate("errors.deadletterqueue.topic.name", "__share_group_state").is_err());
        assert!(validate("errors.deadletterqueue.copy.record.enable", "yes").is_err());
    }

    #[test]
    fn a_session_must_outlast_its_heartbeat_interval_with_the_brokers_value_for_the_unset_one() {
        let configs = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert!(
            validate_all(&configs(&[("consumer.session.timeout.ms", "50000")]), &broker).is_ok()
        );
        let short = configs(&[("consumer.session.timeout.ms", "1500")]);
        assert!(
            validate_all(&short, &broker).is_err(),
            "1500 ms against the broker's 2000 ms heartbeat"
        );
        let both = configs(&[
            ("consumer.session.timeout.ms", "1500"),
            ("consumer.heartbeat.interval.ms", "500"),
        ]);
        assert!(validate_all(&both, &broker).is_ok());
        assert_eq!(default_of("consumer.session.timeout.ms", &broker).as_deref(), Some("45000"));
        assert_eq!(default_of("share.record.lock.duration.ms", &broker).as_deref(), Some("30000"));
        let set = configs(&[("share.record.lock.duration.ms", "15000")]);
        assert_eq!(
            value_of(Some(&set), "share.record.lock.duration.ms", &broker).as_deref(),
            Some("15000")
        );
    }
}
