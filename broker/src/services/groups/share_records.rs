//! KIP-932 share-group records in `__consumer_offsets`, in Kafka 4.1+'s own layout (the same
//! encoding as the KIP-848 records, `consumer::records`), so Kafka's tools read them:
//!
//! - 11 ShareGroupMetadata (key GroupId): Epoch i32, MetadataHash i64.
//! - 15 ShareGroupStatePartitionMetadata (key GroupId): InitializingTopics,
//!   InitializedTopics (both []{TopicId uuid, TopicName string, Partitions []int32}),
//!   DeletingTopics []{TopicId uuid, TopicName string}.
//!
//! What strata keeps in them (ARCHITECTURE.md, "Share groups keep an index of their state"):
//! the group exists (its epoch), and the share partitions it may have state on, the index that
//! DeleteGroups deletes the state of and DescribeShareGroupOffsets without topics answers.
//! strata writes every topic as initialized (its share partitions fix their start offset on
//! first fetch, not from the coordinator) and never writes initializing or deleting topics; it
//! reads both as topics with state, a deleting topic on every partition it has now
//! (`StateIndex::merge_deleting`), since Kafka's record names no partitions for them.
//!
//! Invariants: `decode(encode(r)) == r`; `decode` never panics, checks every count against the
//! bytes that remain before allocating, skips unknown tagged fields and ignores bytes after a
//! value. Kafka 4.0's preview layouts (no MetadataHash, no InitializingTopics) are not read.
//! Pure functions, no I/O.
//! References: Kafka `group-coordinator/src/main/resources/common/message/`
//! `ShareGroup{Metadata,StatePartitionMetadata}{Key,Value}.json` (4.1+),
//! `GroupCoordinatorRecordHelpers.newShareGroupStatePartitionMetadataRecord`.

use super::consumer::records::{
    put_compact_bytes, put_compact_length, put_key_string, put_uvarint, Reader, PARTITION_BYTES_MIN,
};
use super::consumer::TopicId;
use std::collections::{BTreeMap, BTreeSet};

const RECORD_TYPE_SHARE_GROUP_METADATA: i16 = 11;
const RECORD_TYPE_STATE_PARTITION_METADATA: i16 = 15;
const VALUE_VERSION: i16 = 0;
/// The fewest bytes a topic entry takes (uuid, empty name, empty array, no tags), to bound a
/// count before allocating.
const TOPIC_BYTES_MIN: usize = 16 + 1 + 1;

/// A topic a share group may have state on: its name when it was indexed, and the partitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StateTopic {
    pub name: String,
    pub partitions: BTreeSet<i32>,
}

/// The share partitions a group may have state on, by topic id.
pub type StateIndex = BTreeMap<TopicId, StateTopic>;

/// One share-group record, or its tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareRecord {
    /// 11: the group exists, at this epoch.
    Metadata {
        epoch: i32,
        metadata_hash: i64,
    },
    MetadataTombstone,
    /// 15: InitializingTopics and InitializedTopics as read (strata writes all as
    /// `initialized`), DeletingTopics by id with their names.
    StatePartitions {
        initializing: StateIndex,
        initialized: StateIndex,
        deleting: BTreeMap<TopicId, String>,
    },
    StatePartitionsTombstone,
}

impl ShareRecord {
    /// The state-partition record strata writes for `index`.
    pub fn index(index: &StateIndex) -> Self {
        ShareRecord::StatePartitions {
            initializing: StateIndex::new(),
            initialized: index.clone(),
            deleting: BTreeMap::new(),
        }
    }
}

/// Whether `key` is a share-group record key (its first i16 is 11 or 15).
pub fn is_share_group_key(key: &[u8]) -> bool {
    let [high, low, ..] = key else { return false };
    matches!(
        i16::from_be_bytes([*high, *low]),
        RECORD_TYPE_SHARE_GROUP_METADATA | RECORD_TYPE_STATE_PARTITION_METADATA
    )
}

/// (key, value) of `record` for `group`; value None = tombstone.
pub fn encode(group: &str, record: &ShareRecord) -> (Vec<u8>, Option<Vec<u8>>) {
    let record_type = match record {
        ShareRecord::Metadata { .. } | ShareRecord::MetadataTombstone => {
            RECORD_TYPE_SHARE_GROUP_METADATA
        }
        ShareRecord::StatePartitions { .. } | ShareRecord::StatePartitionsTombstone => {
            RECORD_TYPE_STATE_PARTITION_METADATA
        }
    };
    let mut key = Vec::with_capacity(4 + group.len());
    key.extend_from_slice(&record_type.to_be_bytes());
    put_key_string(&mut key, group);
    let mut value = Vec::with_capacity(64);
    value.extend_from_slice(&VALUE_VERSION.to_be_bytes());
    match record {
        ShareRecord::Metadata { epoch, metadata_hash } => {
            value.extend_from_slice(&epoch.to_be_bytes());
            value.extend_from_slice(&metadata_hash.to_be_bytes());
        }
        ShareRecord::StatePartitions { initializing, initialized, deleting } => {
            put_topics(&mut value, initializing);
            put_topics(&mut value, initialized);
            put_compact_length(&mut value, deleting.len());
            for (topic_id, name) in deleting {
                value.extend_from_slice(topic_id);
                put_compact_bytes(&mut value, name.as_bytes());
                put_uvarint(&mut value, 0);
            }
        }
        ShareRecord::MetadataTombstone | ShareRecord::StatePartitionsTombstone => {
            return (key, None)
        }
    }
    put_uvarint(&mut value, 0);
    (key, Some(value))
}

fn put_topics(out: &mut Vec<u8>, topics: &StateIndex) {
    put_compact_length(out, topics.len());
    for (topic_id, topic) in topics {
        out.extend_from_slice(topic_id);
        put_compact_bytes(out, topic.name.as_bytes());
        put_compact_length(out, topic.partitions.len());
        for partition in &topic.partitions {
            out.extend_from_slice(&partition.to_be_bytes());
        }
        put_uvarint(out, 0);
    }
}

/// The group and record of a share-group key and its value; `None` for any other key, or for
/// bytes that do not read.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Option<(String, ShareRecord)> {
    if !is_share_group_key(key) {
        return None;
    }
    let mut reader = Reader::new(key);
    let record_type = reader.i16()?;
    let group = reader.key_string()?;
    if !reader.is_empty() {
        return None;
    }
    let Some(value) = value else {
        return Some((
            group,
            if record_type == RECORD_TYPE_SHARE_GROUP_METADATA {
                ShareRecord::MetadataTombstone
            } else {
                ShareRecord::StatePartitionsTombstone
            },
        ));
    };
    let mut reader = Reader::new(value);
    if reader.i16()? < VALUE_VERSION {
        return None;
    }
    let record = if record_type == RECORD_TYPE_SHARE_GROUP_METADATA {
        let epoch = reader.i32()?;
        let metadata_hash = reader.i64()?;
        reader.skip_tagged()?;
        ShareRecord::Metadata { epoch, metadata_hash }
    } else {
        let initializing = read_topics(&mut reader)?;
        let initialized = read_topics(&mut reader)?;
        let count = reader.array_len(TOPIC_BYTES_MIN)?;
        let mut deleting = BTreeMap::new();
        for _ in 0..count {
            let topic_id = reader.uuid()?;
            let name = reader.string()?;
            reader.skip_tagged()?;
            deleting.insert(topic_id, name);
        }
        reader.skip_tagged()?;
        ShareRecord::StatePartitions { initializing, initialized, deleting }
    };
    Some((group, record))
}

/// A []TopicPartitionsInfo array; a topic listed twice is merged.
fn read_topics(reader: &mut Reader<'_>) -> Option<StateIndex> {
    let count = reader.array_len(TOPIC_BYTES_MIN)?;
    let mut topics = StateIndex::new();
    for _ in 0..count {
        let topic_id = reader.uuid()?;
        let name = reader.string()?;
        let partitions = reader.array_len(PARTITION_BYTES_MIN)?;
        let topic = topics.entry(topic_id).or_default();
        topic.name = name;
        for _ in 0..partitions {
            topic.partitions.insert(reader.i32()?);
        }
        reader.skip_tagged()?;
    }
    Some(topics)
}

/// `index` with `more` added; whether it grew.
pub fn merge(index: &mut StateIndex, more: &StateIndex) -> bool {
    let mut grew = false;
    for (topic_id, topic) in more {
        let entry = index.entry(*topic_id).or_default();
        if entry.name.is_empty() {
            entry.name = topic.name.clone();
        }
        for partition in &topic.partitions {
            grew |= entry.partitions.insert(*partition);
        }
    }
    grew
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> StateIndex {
        let mut index = StateIndex::new();
        index.insert([1; 16], StateTopic { name: "orders".into(), partitions: [0, 2].into() });
        index.insert([2; 16], StateTopic { name: "t".into(), partitions: [5].into() });
        index
    }

    fn every_record() -> Vec<ShareRecord> {
        vec![
            ShareRecord::Metadata { epoch: 7, metadata_hash: -3 },
            ShareRecord::MetadataTombstone,
            ShareRecord::index(&index()),
            ShareRecord::StatePartitions {
                initializing: index(),
                initialized: StateIndex::new(),
                deleting: [([9; 16], "gone".to_string())].into(),
            },
            ShareRecord::StatePartitionsTombstone,
        ]
    }

    #[test]
    fn every_record_round_trips_and_tombstones_have_no_value() {
        for record in every_record() {
            let (key, value) = encode("g", &record);
            assert!(is_share_group_key(&key));
            let tombstone = matches!(
                record,
                ShareRecord::MetadataTombstone | ShareRecord::StatePartitionsTombstone
            );
            assert_eq!(value.is_none(), tombstone, "{record:?}");
            assert_eq!(decode(&key, value.as_deref()), Some(("g".to_string(), record)));
        }
    }

    #[test]
    fn metadata_bytes_are_kafkas() {
        let (key, value) = encode("g", &ShareRecord::Metadata { epoch: 1, metadata_hash: 2 });
        assert_eq!(key, [0, 11, 0, 1, b'g']);
        assert_eq!(value.unwrap(), [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0]);
    }

    #[test]
    fn state_partition_bytes_are_kafkas() {
        let mut one = StateIndex::new();
        one.insert([1; 16], StateTopic { name: "t".into(), partitions: [3].into() });
        let (key, value) = encode("g", &ShareRecord::index(&one));
        assert_eq!(key, [0, 15, 0, 1, b'g']);
        let mut expected = vec![0, 0, 1]; // version 0; InitializingTopics empty
        expected.push(2); // InitializedTopics: one
        expected.extend_from_slice(&[1; 16]);
        expected.extend_from_slice(&[2, b't', 2, 0, 0, 0, 3, 0]); // name, [3], no tags
        expected.extend_from_slice(&[1, 0]); // DeletingTopics empty; no tags
        assert_eq!(value.unwrap(), expected);
    }

    #[test]
    fn every_truncation_is_rejected_without_panicking_and_other_keys_are_not_read() {
        for record in every_record() {
            let (key, value) = encode("group", &record);
            for cut in 0..key.len() {
                assert_eq!(decode(&key[..cut], value.as_deref()), None);
            }
            if let Some(value) = value {
                for cut in 0..value.len() {
                    assert_eq!(decode(&key, Some(&value[..cut])), None, "{record:?} at {cut}");
                }
            }
        }
        // KIP-848 consumer-group keys (type 3) and strata's own offset keys are not these.
        assert_eq!(decode(&[0, 3, 0, 1, b'g'], Some(&[0, 0, 0, 0, 0, 1, 0])), None);
        assert!(!is_share_group_key(b"group\0topic\0"));
    }

    #[test]
    fn huge_counts_are_rejected_before_allocating() {
        let (key, _) = encode("g", &ShareRecord::StatePartitionsTombstone);
        // InitializingTopics claiming 2^28 entries in 6 bytes.
        let value = [0, 0, 0x80, 0x80, 0x80, 0x80, 0x01];
        assert_eq!(decode(&key, Some(&value)), None);
    }

    #[test]
    fn merge_reports_growth_only() {
        let mut have = index();
        assert!(!merge(&mut have, &index()));
        let mut more = StateIndex::new();
        more.insert([1; 16], StateTopic { name: "orders".into(), partitions: [1].into() });
        assert!(merge(&mut have, &more));
        assert_eq!(have[&[1; 16]].partitions, [0, 1, 2].into());
    }
}
