//! Committed consumer-group offsets: the first part of the group coordinator (issue #5).
//!
//! Owns: each group's committed offsets on the shard that owns the group's partition of the
//! internal topic `__consumer_offsets` (partition = Java `String.hashCode(group)` mod 50, as
//! Kafka places groups), their durable log (every commit is a record batch appended to that
//! partition with fdatasync before the commit is acknowledged), and their replay at startup.
//! Membership runs in `membership`/`coordinator`; each group's metadata (generation, members,
//! assignments) is a record of the same partition (`stored`), so a restart keeps groups Stable.
//! Commits from standalone consumers (generation -1) are accepted for groups without members.
//!
//! Record format in `__consumer_offsets` (strata's own; keys are unique per group/partition so
//! the log can be compacted): key = `group \0 topic \0 partition(decimal)`, value =
//! `offset(i64 BE) commit_ms(i64 BE) metadata(utf-8)`; a null value deletes the entry. Group
//! metadata records have the key `group \0 \0` (see `stored`).

pub mod coordinator;
pub mod membership;
pub mod stored;

use crate::metadata::{TopicMetadata, METADATA_FILE};
use crate::state::Shard;
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, HashMap};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's `offsets.topic.num.partitions` default.
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;
/// Longest commit metadata kept (Kafka's `offset.metadata.max.bytes` default).
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub metadata: String,
    pub commit_ms: i64,
}

/// Committed offsets of the groups this shard coordinates: group → (topic, partition) → offset.
pub type OffsetTable = HashMap<String, BTreeMap<(String, i32), Committed>>;

/// Whether `group` can be coordinated: not empty, and without NUL (the separator of its
/// `__consumer_offsets` record keys, so such an id could not be replayed).
pub fn valid_group_id(group: &str) -> bool {
    !group.is_empty() && !group.contains('\0')
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

/// The internal topic's metadata, added to the topic table at first start.
pub fn offsets_topic() -> TopicMetadata {
    let mut configs = BTreeMap::new();
    // Offsets are kept until deleted; segments stay small so a restart replays little.
    configs.insert("retention.ms".to_string(), "-1".to_string());
    configs.insert("segment.bytes".to_string(), (100u64 << 20).to_string());
    TopicMetadata {
        name: OFFSETS_TOPIC.to_string(),
        topic_id: crate::metadata::new_topic_id(),
        partitions: OFFSETS_TOPIC_PARTITIONS,
        configs,
    }
}

/// Adds `__consumer_offsets` to a topic table that lacks it; returns whether it did.
pub fn ensure_offsets_topic(snapshot: &mut crate::metadata::MetadataSnapshot) -> bool {
    if snapshot.topics.contains_key(OFFSETS_TOPIC) {
        return false;
    }
    snapshot.topics.insert(OFFSETS_TOPIC.to_string(), offsets_topic());
    let _ = METADATA_FILE;
    true
}

fn record_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    format!("{group}\0{topic}\0{partition}").into_bytes()
}

fn parse_key(key: &[u8]) -> Option<(String, String, i32)> {
    let text = std::str::from_utf8(key).ok()?;
    let mut parts = text.split('\0');
    let group = parts.next()?.to_string();
    let topic = parts.next()?.to_string();
    let partition = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((group, topic, partition))
}

fn record_value(committed: &Committed) -> Vec<u8> {
    let mut value = Vec::with_capacity(16 + committed.metadata.len());
    value.extend_from_slice(&committed.offset.to_be_bytes());
    value.extend_from_slice(&committed.commit_ms.to_be_bytes());
    value.extend_from_slice(committed.metadata.as_bytes());
    value
}

fn parse_value(value: &[u8]) -> Option<Committed> {
    let offset = i64::from_be_bytes(value.get(..8)?.try_into().ok()?);
    let commit_ms = i64::from_be_bytes(value.get(8..16)?.try_into().ok()?);
    let metadata = String::from_utf8(value.get(16..)?.to_vec()).ok()?;
    Some(Committed { offset, metadata, commit_ms })
}

/// Appends records (a `None` value is a tombstone) to `group`'s `__consumer_offsets`
/// partition, synced before returning.
async fn append_records(
    shard: &Shard,
    group: &str,
    records: &[(Vec<u8>, Option<Vec<u8>>)],
) -> Result<(), crate::error::BrokerError> {
    let state = shard
        .partition(OFFSETS_TOPIC, partition_for_group(group))
        .ok_or_else(|| crate::error::BrokerError::UnknownTopicOrPartition(OFFSETS_TOPIC.into()))?;
    let now = shard::runtime::now_ms();
    let mut builder = wire::RecordBatchBuilder::new(now);
    for (key, value) in records {
        builder.push(wire::BatchRecord {
            key: Some(key),
            value: value.as_deref(),
            timestamp_delta: 0,
        });
    }
    state.log.append_with(BytesMut::from(&builder.build()[..]), 0, now, true).await?;
    Ok(())
}

/// Appends `entries` of `group` durably to its `__consumer_offsets` partition, then applies
/// them to the in-memory table. Runs on the shard that owns that partition.
pub async fn commit(
    shard: &Shard,
    group: &str,
    entries: Vec<(String, i32, Committed)>,
) -> Result<(), crate::error::BrokerError> {
    // Append and table update together, so a compaction never snapshots between them.
    let _guard = shard.offsets_lock.lock().await;
    let records: Vec<(Vec<u8>, Option<Vec<u8>>)> = entries
        .iter()
        .map(|(topic, index, committed)| {
            (record_key(group, topic, *index), Some(record_value(committed)))
        })
        .collect();
    append_records(shard, group, &records).await?;
    let mut table = shard.offsets.borrow_mut();
    let group_offsets = table.entry(group.to_string()).or_default();
    for (topic, index, committed) in entries {
        group_offsets.insert((topic, index), committed);
    }
    Ok(())
}

/// Deletes committed offsets of `group` (all of them when `partitions` is None) with durable
/// tombstones. Returns the partitions that had a commit. Runs on the coordinating shard.
pub async fn delete(
    shard: &Shard,
    group: &str,
    partitions: Option<Vec<(String, i32)>>,
) -> Result<Vec<(String, i32)>, crate::error::BrokerError> {
    let _guard = shard.offsets_lock.lock().await;
    let existing: Vec<(String, i32)> = {
        let table = shard.offsets.borrow();
        match (table.get(group), &partitions) {
            (None, _) => Vec::new(),
            (Some(map), None) => map.keys().cloned().collect(),
            (Some(map), Some(wanted)) => {
                wanted.iter().filter(|key| map.contains_key(*key)).cloned().collect()
            }
        }
    };
    // Deleting the whole group also deletes its metadata record.
    let group_record = partitions.is_none()
        && shard
            .groups
            .borrow()
            .get(group)
            .is_some_and(|cell| cell.group.borrow().stored_value.is_some());
    if existing.is_empty() && !group_record {
        return Ok(existing);
    }
    let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> =
        existing.iter().map(|(t, p)| (record_key(group, t, *p), None)).collect();
    if group_record {
        records.push((stored::key(group), None));
    }
    append_records(shard, group, &records).await?;
    if group_record {
        if let Some(cell) = shard.groups.borrow().get(group) {
            cell.group.borrow_mut().stored_value = None;
        }
    }
    let mut table = shard.offsets.borrow_mut();
    if let Some(map) = table.get_mut(group) {
        for key in &existing {
            map.remove(key);
        }
        if map.is_empty() {
            table.remove(group);
        }
    }
    Ok(existing)
}

/// Writes `group`'s metadata record (its current generation, members and assignments; a
/// tombstone when the coordinator no longer has the group), synced before returning. On
/// failure the group stays dirty so the coordinator's tick tries again.
pub async fn store_group(shard: &Shard, group: &str) -> Result<(), crate::error::BrokerError> {
    let _guard = shard.offsets_lock.lock().await;
    let cell = shard.groups.borrow().get(group).cloned();
    let value = cell.as_ref().map(|cell| {
        let mut live = cell.group.borrow_mut();
        live.dirty = false;
        Bytes::from(stored::StoredGroup::of(&live).encode())
    });
    let appended =
        append_records(shard, group, &[(stored::key(group), value.as_ref().map(|v| v.to_vec()))])
            .await;
    if let Some(cell) = cell {
        let mut live = cell.group.borrow_mut();
        match appended {
            Ok(()) => live.stored_value = value,
            Err(_) => live.dirty = true,
        }
    }
    appended
}

/// Records per batch when the live table is rewritten.
const COMPACTION_BATCH_RECORDS_MAX: usize = 2000;

/// Bounds an `__consumer_offsets` partition: once it holds more than `compact_bytes`, the
/// active segment is rolled, the live entries of the groups on that partition are appended
/// again (durably), and the log start moves to them, which deletes every older segment. What a
/// replay then reads is exactly the live table. (Kafka gets the same from log compaction.)
pub async fn compact(
    shard: &Shard,
    partition: i32,
    compact_bytes: u64,
) -> Result<bool, crate::error::BrokerError> {
    let Some(state) = shard.partition(OFFSETS_TOPIC, partition) else { return Ok(false) };
    if state.log.size_bytes() <= compact_bytes {
        return Ok(false);
    }
    let _guard = shard.offsets_lock.lock().await;
    let live: Vec<(Vec<u8>, Vec<u8>)> = shard
        .offsets
        .borrow()
        .iter()
        .filter(|(group, _)| partition_for_group(group) == partition)
        .flat_map(|(group, map)| {
            map.iter().map(move |((topic, index), committed)| {
                (record_key(group, topic, *index), record_value(committed))
            })
        })
        .chain(shard.groups.borrow().iter().filter_map(|(group, cell)| {
            let stored = cell.group.borrow().stored_value.clone()?;
            (partition_for_group(group) == partition).then(|| (stored::key(group), stored.to_vec()))
        }))
        .collect();
    let now = shard::runtime::now_ms();
    state.log.roll(now).await?;
    let mut first_base = state.log.log_end_offset();
    for (chunk_index, chunk) in live.chunks(COMPACTION_BATCH_RECORDS_MAX).enumerate() {
        let mut builder = wire::RecordBatchBuilder::new(now);
        for (key, value) in chunk {
            builder.push(wire::BatchRecord {
                key: Some(key),
                value: Some(value),
                timestamp_delta: 0,
            });
        }
        let info =
            state.log.append_with(BytesMut::from(&builder.build()[..]), 0, now, true).await?;
        if chunk_index == 0 {
            first_base = info.base_offset;
        }
    }
    state.log.delete_records_before(first_base).await?;
    tracing::info!(
        partition,
        live = live.len(),
        log_start = first_base,
        "compacted committed offsets"
    );
    Ok(true)
}

/// Rebuilds the offsets table from the `__consumer_offsets` partitions this shard owns.
pub async fn replay(shard: &Shard) -> Result<usize, String> {
    let owned: Vec<_> = shard
        .partitions
        .borrow()
        .iter()
        .filter(|((topic, _), _)| topic == OFFSETS_TOPIC)
        .map(|(_, state)| state.clone())
        .collect();
    let mut applied = 0;
    let mut groups: HashMap<String, Option<Vec<u8>>> = HashMap::new();
    for state in owned {
        let mut offset = state.log.log_start_offset();
        while offset < state.log.log_end_offset() {
            let read = state.log.read(offset, 1 << 20).await.map_err(|e| e.to_string())?;
            if read.batches.is_empty() {
                break;
            }
            for batch in read.batches {
                let header = wire::RecordBatchHeader::parse(&batch, shard::config::BATCH_BYTES_MAX)
                    .map_err(|e| e.to_string())?;
                offset = header.last_offset() + 1;
                let mut table = shard.offsets.borrow_mut();
                for record in wire::compression::records_of(&header).map_err(|e| e.to_string())? {
                    if let Some(group) = record.key.as_deref().and_then(stored::parse_key) {
                        groups.insert(group, record.value);
                        applied += 1;
                        continue;
                    }
                    let Some((group, topic, partition)) = record.key.as_deref().and_then(parse_key)
                    else {
                        continue;
                    };
                    let group_offsets = table.entry(group).or_default();
                    match record.value.as_deref().and_then(parse_value) {
                        Some(committed) => {
                            group_offsets.insert((topic, partition), committed);
                        }
                        None => {
                            group_offsets.remove(&(topic, partition));
                        }
                    }
                    applied += 1;
                }
            }
        }
    }
    restore_groups(shard, groups);
    Ok(applied)
}

/// Brings back the groups whose last metadata record survived replay: with members as Stable
/// (sessions restart now), without members only while they still have committed offsets.
fn restore_groups(shard: &Shard, records: HashMap<String, Option<Vec<u8>>>) {
    let now = std::time::Instant::now();
    let offsets = shard.offsets.borrow();
    let mut groups = shard.groups.borrow_mut();
    for (name, value) in records {
        let Some(value) = value else { continue };
        let Some(stored) = stored::StoredGroup::decode(&value) else {
            tracing::warn!(group = %name, "unreadable group metadata record skipped");
            continue;
        };
        if stored.members.is_empty() && !offsets.contains_key(&name) {
            continue;
        }
        let mut group = stored.into_group(now);
        group.stored_value = Some(Bytes::from(value));
        tracing::info!(group = %name, generation = group.generation, members = group.members.len(), state = group.state.name(), "group restored");
        groups.insert(name, membership::GroupCell::with(group));
    }
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

    #[test]
    fn records_round_trip() {
        let committed = Committed { offset: 42, metadata: "meta".into(), commit_ms: 7 };
        assert_eq!(parse_value(&record_value(&committed)), Some(committed));
        assert_eq!(parse_key(&record_key("g", "t-1", 3)), Some(("g".into(), "t-1".into(), 3)));
        assert_eq!(parse_key(b"no separators"), None);
    }
}
