//! Client quotas in the cluster metadata (KIP-546, Kafka's ClientQuotaRecord): which entity
//! (user, client id, both, their defaults) has which quota, AlterClientQuotas and
//! DescribeClientQuotas decided against an image with Kafka's rules
//! (`ClientQuotaControlManager`), and the quota that applies to a request's (user, client
//! id) with Kafka's precedence (`ClientQuotaManager`, the eight levels of KIP-55).
//!
//! Enforced in this build: `producer_byte_rate`, `consumer_byte_rate` and `request_percentage`
//! (KIP-124: the share of request-handling time, 100 being one core's worth;
//! `services::quotas`). `controller_mutation_rate` and ip quotas are refused when set, with a
//! message saying so, rather than stored and silently not enforced.

pub use super::client_quota::{QuotaEntity, QuotaValue, CLIENT_ID, IP, USER};
use super::image::MetadataImage;
use super::records::MetadataRecord;
use crate::error::{BrokerError, Result};

/// The quota keys this build enforces.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// KIP-124: the percentage of a core's request-handling time per second (a double).
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Kafka's other quota keys: known, refused until enforced.
const NOT_ENFORCED: &[&str] = &["controller_mutation_rate", "connection_creation_rate"];

/// One entity's alteration: (key, `Some(value)` to set, `None` to remove).
pub type QuotaOps = Vec<(String, Option<f64>)>;

/// The records of one entity's alteration, checked as Kafka's controller checks it.
pub fn alter(entity: &QuotaEntity, ops: &QuotaOps) -> Result<Vec<MetadataRecord>> {
    let mut seen = std::collections::BTreeSet::new();
    let mut records = Vec::new();
    for (key, value) in ops {
        if !seen.insert(key.as_str()) {
            return Err(BrokerError::InvalidRequest(format!("Duplicate quota key {key}")));
        }
        if entity.ip.is_some() {
            return Err(BrokerError::InvalidRequest(format!(
                "{key}: ip quotas (connection_creation_rate) are not enforced in this build \
                 (issue #18)"
            )));
        }
        if NOT_ENFORCED.contains(&key.as_str()) {
            return Err(BrokerError::InvalidRequest(format!(
                "{key} is not enforced in this build (issue #18); {PRODUCER_BYTE_RATE}, \
                 {CONSUMER_BYTE_RATE} and {REQUEST_PERCENTAGE} are"
            )));
        }
        if key != PRODUCER_BYTE_RATE && key != CONSUMER_BYTE_RATE && key != REQUEST_PERCENTAGE {
            return Err(BrokerError::InvalidRequest(format!("Invalid configuration key {key}")));
        }
        if let Some(value) = value {
            // request_percentage is a Double in Kafka, the byte rates are Longs.
            let (valid, kind) = if key == REQUEST_PERCENTAGE {
                (value.is_finite() && *value > 0.0, "Double")
            } else {
                (value.is_finite() && *value > 0.0 && value.fract() == 0.0, "Long")
            };
            if !valid {
                return Err(BrokerError::InvalidRequest(format!(
                    "Configuration {key} must be a positive {kind} value, not {value}"
                )));
            }
        }
        records.push(MetadataRecord::ClientQuota {
            entity: entity.clone(),
            key: key.clone(),
            value: value.map(QuotaValue),
        });
    }
    Ok(records)
}

/// A DescribeClientQuotas filter component: an entity type and what its name must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// MATCH_TYPE_EXACT (0): this name.
    Exact(String),
    /// MATCH_TYPE_DEFAULT (1): the type's default.
    Default,
    /// MATCH_TYPE_SPECIFIED (2): any name, not the default.
    Specified,
}

/// The entities a describe found, with their (key, value) quotas.
pub type Described = Vec<(QuotaEntity, Vec<(String, f64)>)>;

/// The entities matching `components` (every component's type present with a matching name;
/// `strict`: and no other type), with their quotas.
pub fn describe(
    image: &MetadataImage,
    components: &[(String, Match)],
    strict: bool,
) -> Result<Described> {
    let mut types = std::collections::BTreeSet::new();
    for (kind, _) in components {
        if ![USER, CLIENT_ID, IP].contains(&kind.as_str()) {
            return Err(BrokerError::InvalidRequest(format!(
                "Custom entity type '{kind}' not supported"
            )));
        }
        if !types.insert(kind.as_str()) {
            return Err(BrokerError::InvalidRequest(format!(
                "Duplicate filter component entity type {kind}"
            )));
        }
    }
    let matches = |entity: &QuotaEntity| {
        let present = entity.components();
        let all = components.iter().all(|(kind, wanted)| {
            present.iter().any(|(k, name)| {
                *k == kind.as_str()
                    && match wanted {
                        Match::Exact(want) => name.as_deref() == Some(want.as_str()),
                        Match::Default => name.is_none(),
                        Match::Specified => name.is_some(),
                    }
            })
        });
        all && (!strict || present.len() == components.len())
    };
    Ok(image
        .quotas
        .iter()
        .filter(|(entity, _)| matches(entity))
        .map(|(entity, values)| {
            (entity.clone(), values.iter().map(|(k, v)| (k.clone(), v.0)).collect())
        })
        .collect())
}

/// The user and client id a quota is tracked under (each only when its entity names that
/// type).
pub type Tags = (Option<String>, Option<String>);

/// The `key` quota of a request from `user` (the principal's name) with `client_id`, by
/// Kafka's precedence: user and client id, user and default client, user, default user and
/// client id, default user and default client, default user, client id, default client. With
/// the tags the quota is tracked under: the user and the client id, each only when the
/// quota's entity names that type (a default quota is each user's or client's own).
pub fn resolve(
    image: &MetadataImage,
    user: &str,
    client_id: &str,
    key: &str,
) -> Option<(f64, Tags)> {
    if image.quotas.is_empty() {
        return None;
    }
    let named = |value: &str| Some(Some(value.to_string()));
    type Part = Option<Option<String>>;
    let levels: [(Part, Part); 8] = [
        (named(user), named(client_id)),
        (named(user), Some(None)),
        (named(user), None),
        (Some(None), named(client_id)),
        (Some(None), Some(None)),
        (Some(None), None),
        (None, named(client_id)),
        (None, Some(None)),
    ];
    for (user_part, client_part) in levels {
        let tags = (
            user_part.is_some().then(|| user.to_string()),
            client_part.is_some().then(|| client_id.to_string()),
        );
        let entity = QuotaEntity { user: user_part, client_id: client_part, ip: None };
        if let Some(value) = image.quotas.get(&entity).and_then(|values| values.get(key)) {
            return Some((value.0, tags));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::apply_all;

    fn entity(user: Option<Option<&str>>, client: Option<Option<&str>>) -> QuotaEntity {
        QuotaEntity {
            user: user.map(|u| u.map(str::to_string)),
            client_id: client.map(|c| c.map(str::to_string)),
            ip: None,
        }
    }

    fn set(image: &MetadataImage, entity: &QuotaEntity, value: f64) -> MetadataImage {
        let ops = vec![(PRODUCER_BYTE_RATE.to_string(), Some(value))];
        apply_all(image, &alter(entity, &ops).expect("valid")).expect("applies")
    }

    #[test]
    fn the_most_specific_quota_applies_with_kafkas_precedence() {
        let mut image = MetadataImage::default();
        assert_eq!(resolve(&image, "alice", "app", PRODUCER_BYTE_RATE), None);
        image = set(&image, &entity(None, Some(None)), 8.0);
        let found = resolve(&image, "alice", "app", PRODUCER_BYTE_RATE);
        assert_eq!(found, Some((8.0, (None, Some("app".into())))), "a default is per client");
        image = set(&image, &entity(None, Some(Some("app"))), 7.0);
        image = set(&image, &entity(Some(None), None), 6.0);
        image = set(&image, &entity(Some(Some("alice")), None), 3.0);
        image = set(&image, &entity(Some(Some("alice")), Some(Some("app"))), 1.0);
        let value = |image: &MetadataImage, user, client| {
            resolve(image, user, client, PRODUCER_BYTE_RATE).map(|q| q.0)
        };
        assert_eq!(value(&image, "alice", "app"), Some(1.0));
        assert_eq!(value(&image, "alice", "other"), Some(3.0));
        assert_eq!(value(&image, "bob", "app"), Some(6.0), "the default user before the client");
        let removal = vec![(PRODUCER_BYTE_RATE.to_string(), None)];
        let records = alter(&entity(Some(None), None), &removal).expect("valid");
        image = apply_all(&image, &records).expect("applies");
        assert_eq!(value(&image, "bob", "app"), Some(7.0));
        assert_eq!(value(&image, "bob", "other"), Some(8.0));
    }

    #[test]
    fn bad_entities_keys_and_values_are_refused() {
        let pairs = |items: &[(&str, Option<&str>)]| -> Vec<(String, Option<String>)> {
            items.iter().map(|(k, v)| (k.to_string(), v.map(str::to_string))).collect()
        };
        for bad in [
            pairs(&[]),
            pairs(&[("user", Some("a")), ("user", Some("b"))]),
            pairs(&[("group", Some("a"))]),
            pairs(&[("user", Some(""))]),
            pairs(&[("ip", Some("1.2.3.4")), ("user", Some("a"))]),
        ] {
            assert!(QuotaEntity::from_components(&bad).is_err(), "{bad:?}");
        }
        let user = entity(Some(Some("a")), None);
        for ops in [
            vec![("controller_mutation_rate".to_string(), Some(10.0))],
            vec![(REQUEST_PERCENTAGE.to_string(), Some(0.0))],
            vec![(REQUEST_PERCENTAGE.to_string(), Some(f64::NAN))],
            vec![("nonsense".to_string(), Some(10.0))],
            vec![(PRODUCER_BYTE_RATE.to_string(), Some(-1.0))],
            vec![(PRODUCER_BYTE_RATE.to_string(), Some(1.5))],
            vec![
                (PRODUCER_BYTE_RATE.to_string(), Some(1.0)),
                (PRODUCER_BYTE_RATE.to_string(), None),
            ],
        ] {
            assert!(alter(&user, &ops).is_err(), "{ops:?}");
        }
    }

    #[test]
    fn describe_filters_by_component_and_strictness() {
        let mut image = MetadataImage::default();
        image = set(&image, &entity(Some(Some("alice")), None), 1.0);
        image = set(&image, &entity(Some(Some("alice")), Some(Some("app"))), 2.0);
        image = set(&image, &entity(Some(None), None), 3.0);
        let user = |m: Match| vec![(USER.to_string(), m)];
        assert_eq!(
            describe(&image, &user(Match::Exact("alice".into())), false).expect("ok").len(),
            2
        );
        assert_eq!(
            describe(&image, &user(Match::Exact("alice".into())), true).expect("ok").len(),
            1
        );
        assert_eq!(describe(&image, &user(Match::Default), false).expect("ok").len(), 1);
        assert_eq!(describe(&image, &user(Match::Specified), false).expect("ok").len(), 2);
        assert_eq!(describe(&image, &[], false).expect("ok").len(), 3);
        assert!(describe(&image, &[("group".into(), Match::Default)], false).is_err());
    }
}
