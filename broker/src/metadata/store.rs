//! `strata-metadata.json`: the metadata image on disk, written atomically (temp file, fsync,
//! rename, directory fsync) by the metadata service before a change is acknowledged.
//!
//! Format 2 (this version): `{"format": 2, "version": N, "cluster_id": "...", "topics": {name:
//! {"name", "topic_id": [16 bytes], "configs": {key: value}, "partitions": [{"leader": node,
//! "shard": shard, "leader_epoch": epoch, "replicas": [node, ...]}, ...]}}, "broker_configs":
//! {resource: {key: value}}}` (the last only when a dynamic broker config is set), and "scram":
//! [{"user", "mechanism", "salt", "stored_key", "server_key", "iterations"}] when a user has a
//! SCRAM credential (salted keys only, never a password).
//! Format 1 (before placement was stored) has `"partitions": <count>` and no `format` key; it is
//! read with each partition given its initial placement (the hash it was owned by), and the
//! caller rewrites the file in format 2.
//! Invariant: `load(to_json(image)) == image`.

use super::image::{MetadataImage, TopicImage};
use super::placement::{Placement, PlacementPolicy};
use super::record_codec::{
    entity_of, stored_entity, StoredAcl, StoredPlacement, StoredQuotaEntity, StoredScram,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const METADATA_FILE: &str = "strata-metadata.json";
pub const FORMAT: u32 = 2;

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum StoredPartitions {
    /// Format 1: a count, placed by hash.
    Count(i32),
    Placed(Vec<StoredPlacement>),
}

#[derive(Serialize, Deserialize)]
struct StoredTopic {
    name: String,
    topic_id: [u8; 16],
    partitions: StoredPartitions,
    #[serde(default)]
    configs: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct StoredImage {
    #[serde(default = "format_one")]
    format: u32,
    version: u64,
    cluster_id: String,
    topics: BTreeMap<String, StoredTopic>,
    /// Dynamic broker configs (added within format 2: a file without them has none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Group configs (added within format 2: a file without them has none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Registered brokers (added within format 2: a cluster's snapshots; a single node has
    /// none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    brokers: Vec<super::record_codec::StoredBroker>,
    /// Controller-only voters' directory ids (added within format 2).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    controllers: BTreeMap<i32, String>,
    /// The next producer id to give out in blocks (added within format 2).
    #[serde(default, skip_serializing_if = "is_zero")]
    next_producer_id: i64,
    /// SCRAM credentials (added within format 2, issue #18).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scram: Vec<StoredScram>,
    /// Client quotas (added within format 2, issue #18): (entity, key → value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    quotas: Vec<(StoredQuotaEntity, BTreeMap<String, f64>)>,
    /// ACLs (added within format 2, issue #18).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    acls: Vec<StoredAcl>,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

fn format_one() -> u32 {
    1
}

/// A fresh cluster: a new random cluster id, no topics.
pub fn new_cluster() -> MetadataImage {
    let id = uuid::Uuid::new_v4();
    MetadataImage {
        version: 0,
        cluster_id: short_id(id.as_bytes()),
        topics: BTreeMap::new(),
        broker_configs: BTreeMap::new(),
        group_configs: BTreeMap::new(),
        brokers: BTreeMap::new(),
        controllers: BTreeMap::new(),
        next_producer_id: 0,
        scram: BTreeMap::new(),
        quotas: BTreeMap::new(),
        acls: Default::default(),
    }
}

/// A new random id in the cluster id's form (a `meta.properties` directory id).
pub fn random_id() -> String {
    short_id(uuid::Uuid::new_v4().as_bytes())
}

/// Kafka-style cluster id: base64url of 16 bytes, without padding (22 characters).
fn short_id(bytes: &[u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits: u128 = u128::from_be_bytes(*bytes);
    let mut out = String::with_capacity(22);
    for _ in 0..22 {
        out.push(char::from(ALPHABET[(bits & 63) as usize]));
        bits >>= 6;
    }
    out
}

pub fn to_json(image: &MetadataImage) -> Vec<u8> {
    let stored = StoredImage {
        format: FORMAT,
        version: image.version,
        cluster_id: image.cluster_id.clone(),
        broker_configs: image.broker_configs.clone(),
        group_configs: image.group_configs.clone(),
        brokers: image
            .brokers
            .values()
            .map(|b| {
                super::record_codec::StoredBroker::from_registration(&b.registration, b.fenced)
            })
            .collect(),
        controllers: image.controllers.iter().map(|(node, dir)| (node.0, dir.clone())).collect(),
        next_producer_id: image.next_producer_id,
        scram: image
            .scram
            .iter()
            .flat_map(|(user, credentials)| {
                credentials
                    .iter()
                    .map(|(mechanism, credential)| StoredScram::new(user, *mechanism, credential))
            })
            .collect(),
        quotas: image
            .quotas
            .iter()
            .map(|(entity, values)| {
                let values = values.iter().map(|(k, v)| (k.clone(), v.0)).collect();
                (stored_entity(entity), values)
            })
            .collect(),
        acls: image.acls.iter().map(|(id, binding)| StoredAcl::new(*id, binding)).collect(),
        topics: image
            .topics
            .iter()
            .map(|(name, topic)| {
                let partitions = topic.partitions.iter().map(StoredPlacement::from).collect();
                let stored = StoredTopic {
                    name: topic.name.clone(),
                    topic_id: topic.topic_id,
                    partitions: StoredPartitions::Placed(partitions),
                    configs: topic.configs.clone(),
                };
                (name.clone(), stored)
            })
            .collect(),
    };
    serde_json::to_vec_pretty(&stored).unwrap_or_default()
}

/// Reads the file; a format-1 file is placed with `policy` and reported as `migrated` (the
/// caller rewrites it).
pub fn load(bytes: &[u8], policy: PlacementPolicy) -> Result<(MetadataImage, bool), String> {
    let stored: StoredImage = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if stored.format > FORMAT {
        return Err(format!(
            "metadata format {} is newer than this strata understands ({FORMAT})",
            stored.format
        ));
    }
    let mut migrated = false;
    let mut topics = BTreeMap::new();
    for (name, topic) in stored.topics {
        let partitions = match topic.partitions {
            StoredPartitions::Count(count) => {
                migrated = true;
                (0..count.max(0)).map(|p| policy.initial(&name, p)).collect()
            }
            StoredPartitions::Placed(list) => list.into_iter().map(Placement::from).collect(),
        };
        let image_topic = TopicImage {
            name: topic.name,
            topic_id: topic.topic_id,
            partitions,
            configs: topic.configs,
        };
        topics.insert(name, image_topic);
    }
    let image = MetadataImage {
        cluster_id: stored.cluster_id,
        version: stored.version,
        topics,
        broker_configs: stored.broker_configs,
        group_configs: stored.group_configs,
        brokers: stored
            .brokers
            .into_iter()
            .map(|stored| {
                let (registration, fenced) = stored.into_registration();
                (registration.node, super::image::BrokerImage { registration, fenced })
            })
            .collect(),
        controllers: stored
            .controllers
            .into_iter()
            .map(|(node, dir)| (wire::ids::NodeId(node), dir))
            .collect(),
        next_producer_id: stored.next_producer_id,
        scram: BTreeMap::new(),
        quotas: stored
            .quotas
            .into_iter()
            .map(|(entity, values)| {
                let values = values
                    .into_iter()
                    .map(|(k, v)| (k, super::client_quota::QuotaValue(v)))
                    .collect();
                (entity_of(entity), values)
            })
            .collect(),
        acls: Default::default(),
    };
    let mut image = image;
    for stored in stored.acls {
        image.acls.insert(stored.id, stored.binding());
    }
    for stored in stored.scram {
        let credential = stored.credential();
        image.scram.entry(stored.user).or_default().insert(stored.mechanism.into(), credential);
    }
    Ok((image, migrated))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: PlacementPolicy = PlacementPolicy { node: wire::ids::NodeId(0), shard_count: 2 };

    #[test]
    fn images_round_trip_through_json() {
        let mut image = new_cluster();
        assert_eq!(image.cluster_id.len(), 22);
        image.topics.insert(
            "a".into(),
            TopicImage {
                name: "a".into(),
                topic_id: [5; 16],
                partitions: (0..3).map(|p| POLICY.initial("a", p)).collect(),
                configs: [("retention.ms".to_string(), "1".to_string())].into(),
            },
        );
        image.version = 9;
        let credential = crate::sasl::scram::ScramCredential {
            salt: vec![1],
            stored_key: vec![2; 32],
            server_key: vec![3; 32],
            iterations: 4096,
        };
        image
            .scram
            .entry("alice".into())
            .or_default()
            .insert(crate::sasl::scram::ScramMechanism::Sha256, credential);
        let entity = super::super::client_quota::QuotaEntity {
            user: Some(None),
            client_id: Some(Some("app".into())),
            ip: None,
        };
        image.quotas.insert(
            entity,
            [("producer_byte_rate".to_string(), super::super::client_quota::QuotaValue(1e6))]
                .into(),
        );
        let binding = crate::metadata::acl::AclBinding::from_wire(2, "a-", 4, "User:a", "*", 3, 3)
            .expect("a valid binding");
        image.acls.insert([3; 16], binding);
        assert_eq!(load(&to_json(&image), POLICY), Ok((image, false)));
        assert!(load(b"{garbage", POLICY).is_err());
    }

    #[test]
    fn a_format_one_file_is_placed_by_the_hash_it_was_owned_by() {
        let old = br#"{"version": 3, "cluster_id": "abc", "topics": {"t": {"name": "t",
            "topic_id": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16], "partitions": 4,
            "configs": {"retention.ms": "5"}}}}"#;
        let (image, migrated) = load(old, POLICY).expect("format 1 loads");
        assert!(migrated);
        let topic = image.topic("t").expect("topic");
        let expected: Vec<Placement> = (0..4).map(|p| POLICY.initial("t", p)).collect();
        assert_eq!(topic.partitions, expected);
        assert_eq!(image.version, 3);
        let newer = br#"{"format": 3, "version": 1, "cluster_id": "x", "topics": {}}"#;
        assert!(load(newer, POLICY).unwrap_err().contains("newer"));
    }
}
