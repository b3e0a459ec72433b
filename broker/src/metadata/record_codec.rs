//! Metadata records as the controller's Raft log stores them: serde_json of a tagged enum
//! (ARCHITECTURE.md, "Cluster control plane"). A separate stored form, as `store` has for the
//! image, so the in-memory records can change shape without changing the log's.
//!
//! Format: `{"type": "topic", "name": ..., "topic_id": [16 bytes]}`, `{"type": "partition",
//! "topic_id", "partition", "placement": {"leader", "shard", "leader_epoch", "replicas"}}`,
//! `{"type": "topic_config", "topic", "key", "value"}`, `{"type": "remove_topic", "topic_id"}`,
//! `{"type": "broker_config", "resource", "key", "value"}`; `value` null removes.
//! Invariant: variants are only ever added. An unknown `type` fails to decode, and the node
//! stops with the error rather than skip a record (a skipped record would fork the image).

use super::image::TopicId;
use super::records::MetadataRecord;
use super::store::StoredPlacement;
use serde::{Deserialize, Serialize};
use wire::ids::PartitionId;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum StoredRecord {
    Topic { name: String, topic_id: TopicId },
    Partition { topic_id: TopicId, partition: i32, placement: StoredPlacement },
    TopicConfig { topic: String, key: String, value: Option<String> },
    RemoveTopic { topic_id: TopicId },
    BrokerConfig { resource: String, key: String, value: Option<String> },
}

impl From<&MetadataRecord> for StoredRecord {
    fn from(record: &MetadataRecord) -> Self {
        match record.clone() {
            MetadataRecord::Topic { name, topic_id } => StoredRecord::Topic { name, topic_id },
            MetadataRecord::Partition { topic_id, partition, placement } => {
                StoredRecord::Partition {
                    topic_id,
                    partition: partition.0,
                    placement: StoredPlacement::from(&placement),
                }
            }
            MetadataRecord::TopicConfig { topic, key, value } => {
                StoredRecord::TopicConfig { topic, key, value }
            }
            MetadataRecord::RemoveTopic { topic_id } => StoredRecord::RemoveTopic { topic_id },
            MetadataRecord::BrokerConfig { resource, key, value } => {
                StoredRecord::BrokerConfig { resource, key, value }
            }
        }
    }
}

impl From<StoredRecord> for MetadataRecord {
    fn from(record: StoredRecord) -> Self {
        match record {
            StoredRecord::Topic { name, topic_id } => MetadataRecord::Topic { name, topic_id },
            StoredRecord::Partition { topic_id, partition, placement } => {
                MetadataRecord::Partition {
                    topic_id,
                    partition: PartitionId(partition),
                    placement: placement.into(),
                }
            }
            StoredRecord::TopicConfig { topic, key, value } => {
                MetadataRecord::TopicConfig { topic, key, value }
            }
            StoredRecord::RemoveTopic { topic_id } => MetadataRecord::RemoveTopic { topic_id },
            StoredRecord::BrokerConfig { resource, key, value } => {
                MetadataRecord::BrokerConfig { resource, key, value }
            }
        }
    }
}

/// A list of records in its stored form, for `#[serde(into, from)]` on types that carry them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct StoredRecords(pub Vec<StoredRecord>);

impl From<Vec<MetadataRecord>> for StoredRecords {
    fn from(records: Vec<MetadataRecord>) -> Self {
        StoredRecords(records.iter().map(StoredRecord::from).collect())
    }
}

impl From<StoredRecords> for Vec<MetadataRecord> {
    fn from(records: StoredRecords) -> Self {
        records.0.into_iter().map(MetadataRecord::from).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::placement::PlacementPolicy;
    use wire::ids::NodeId;

    #[test]
    fn every_record_round_trips_and_an_unknown_type_is_refused() {
        let policy = PlacementPolicy { node: NodeId(2), shard_count: 2 };
        let records = vec![
            MetadataRecord::Topic { name: "t".into(), topic_id: [7; 16] },
            MetadataRecord::Partition {
                topic_id: [7; 16],
                partition: PartitionId(0),
                placement: policy.initial("t", 0),
            },
            MetadataRecord::TopicConfig {
                topic: "t".into(),
                key: "retention.ms".into(),
                value: Some("5".into()),
            },
            MetadataRecord::TopicConfig { topic: "t".into(), key: "x".into(), value: None },
            MetadataRecord::RemoveTopic { topic_id: [7; 16] },
            MetadataRecord::BrokerConfig { resource: "".into(), key: "k".into(), value: None },
        ];
        let json = serde_json::to_string(&StoredRecords::from(records.clone())).expect("encode");
        let back: StoredRecords = serde_json::from_str(&json).expect("decode");
        assert_eq!(Vec::<MetadataRecord>::from(back), records);
        let unknown = r#"[{"type": "fence_broker", "broker": 1}]"#;
        let error = serde_json::from_str::<StoredRecords>(unknown).unwrap_err().to_string();
        assert!(error.contains("fence_broker"), "{error}");
    }
}
