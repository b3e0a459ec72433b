//! Committed offsets and group records in `__consumer_offsets`, on the coordinating shard.
//!
//! Durability rule: every commit, deletion and group record is a record batch appended to the
//! group's `__consumer_offsets` partition with fdatasync before it is applied to the in-memory
//! table and acknowledged; replay at startup rebuilds the table from those partitions.
//!
//! Record format (strata's own; keys are unique per group/partition so the log can be
//! compacted): key = `group \0 topic \0 partition(decimal)`, value = `offset(i64 BE)
//! commit_ms(i64 BE) [leader_epoch(i32 BE)] metadata(utf-8)`; a null value deletes the entry.
//! The committed leader epoch (KIP-320) was added later: a value that has it is marked by the
//! top bit of `commit_ms` (a commit time is never negative), so values written before it read
//! as epoch -1. Group metadata records have the key `group \0 \0` (see `stored`).

use super::consumer::records as consumer_records;
use super::{share_records, stored, GroupCell, GroupService};
use crate::error::{BrokerError, GroupError, Result};
use crate::metadata::internal::{partition_for_group, OFFSETS_TOPIC};
use bytes::{Bytes, BytesMut};
use shard::io::Storage;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use wire::ids::TopicPartition;

/// Longest commit metadata kept (Kafka's `offset.metadata.max.bytes` default).
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;
/// Records per batch when the live table is rewritten.
const COMPACTION_BATCH_RECORDS_MAX: usize = 2000;
/// Bytes read at a time when replaying an `__consumer_offsets` partition.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub metadata: String,
    pub commit_ms: i64,
    /// The leader epoch of the record before the offset, as the consumer saw it (KIP-320;
    /// -1 unknown): consumers compare it with the log to detect truncation.
    pub leader_epoch: i32,
}

/// The top bit of a stored `commit_ms`: a leader epoch follows it.
const WITH_LEADER_EPOCH: i64 = i64::MIN;

/// Committed offsets of the groups this shard coordinates: group → partition → offset.
pub type OffsetTable = HashMap<String, BTreeMap<TopicPartition, Committed>>;

pub(super) fn record_key(group: &str, partition: &TopicPartition) -> Vec<u8> {
    format!("{group}\0{}\0{}", partition.topic, partition.partition.0).into_bytes()
}

/// (group, partition) of an offset record key, or `None` for any other key.
pub fn parse_key(key: &[u8]) -> Option<(String, TopicPartition)> {
    let text = std::str::from_utf8(key).ok()?;
    let mut parts = text.split('\0');
    let group = parts.next()?.to_string();
    let topic = parts.next()?.to_string();
    let partition = parts.next()?.parse().ok()?;
    parts.next().is_none().then(|| (group, TopicPartition::new(topic, partition)))
}

pub(super) fn record_value(committed: &Committed) -> Vec<u8> {
    let mut value = Vec::with_capacity(20 + committed.metadata.len());
    value.extend_from_slice(&committed.offset.to_be_bytes());
    value.extend_from_slice(&(committed.commit_ms.max(0) | WITH_LEADER_EPOCH).to_be_bytes());
    value.extend_from_slice(&committed.leader_epoch.to_be_bytes());
    value.extend_from_slice(committed.metadata.as_bytes());
    value
}

fn parse_value(value: &[u8]) -> Option<Committed> {
    let offset = i64::from_be_bytes(value.get(..8)?.try_into().ok()?);
    let stored_ms = i64::from_be_bytes(value.get(8..16)?.try_into().ok()?);
    let (commit_ms, leader_epoch, rest) = if stored_ms & WITH_LEADER_EPOCH != 0 {
        let epoch = i32::from_be_bytes(value.get(16..20)?.try_into().ok()?);
        (stored_ms & !WITH_LEADER_EPOCH, epoch, value.get(20..)?)
    } else {
        (stored_ms, -1, value.get(16..)?)
    };
    let metadata = String::from_utf8(rest.to_vec()).ok()?;
    Some(Committed { offset, metadata, commit_ms, leader_epoch })
}

/// How long a commit waits for the in-sync replicas of a replicated offsets partition.
pub const GROUP_REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub(super) fn offsets_partition(group: &str) -> TopicPartition {
    TopicPartition::new(OFFSETS_TOPIC, partition_for_group(group))
}

impl<S: Storage> GroupService<S> {
    /// Appends records (a `None` value is a tombstone) to `group`'s `__consumer_offsets`
    /// partition, synced before returning.
    pub(super) async fn append_records(
        &self,
        group: &str,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> Result<()> {
        self.append_records_as(group, records, None).await
    }

    /// `append_records`, as a transactional batch of `producer` (id, epoch) when given (a
    /// TxnOffsetCommit: no sequence, the producer's epoch is checked by the log).
    pub(super) async fn append_records_as(
        &self,
        group: &str,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
        producer: Option<(i64, i16)>,
    ) -> Result<()> {
        let owned = self
            .partitions
            .local(&offsets_partition(group))
            .ok_or(BrokerError::Group(GroupError::CoordinatorNotAvailable))?;
        let now = self.clock.now_ms();
        let mut builder = wire::RecordBatchBuilder::new(now);
        if let Some((producer_id, producer_epoch)) = producer {
            builder.producer(producer_id, producer_epoch, -1);
            builder.transactional();
        }
        for (key, value) in records {
            builder.push(wire::BatchRecord {
                key: Some(key),
                value: value.as_deref(),
                timestamp_delta: 0,
            });
        }
        // Acknowledged once every in-sync replica has it (the group survives this broker).
        let batch = BytesMut::from(&builder.build()[..]);
        let partition = offsets_partition(group);
        let me = self.partitions.node();
        match owned.append_committed(&partition, me, batch, now, GROUP_REPLICATION_TIMEOUT).await {
            Ok(_) => Ok(()),
            Err(error @ BrokerError::Storage(_)) => Err(error),
            Err(BrokerError::NotLeader(_)) => Err(BrokerError::Group(GroupError::NotCoordinator)),
            Err(_) => Err(BrokerError::Group(GroupError::CoordinatorNotAvailable)),
        }
    }

    /// Appends `entries` of `group` durably, then applies them to the in-memory table.
    pub(super) async fn commit(
        &self,
        group: &str,
        entries: Vec<(TopicPartition, Committed)>,
    ) -> Result<()> {
        // Append and table update together, so a compaction never snapshots between them.
        let _guard = self.offsets_lock.lock().await;
        let records: Vec<(Vec<u8>, Option<Vec<u8>>)> = entries
            .iter()
            .map(|(partition, committed)| {
                (record_key(group, partition), Some(record_value(committed)))
            })
            .collect();
        self.append_records(group, &records).await?;
        let mut table = self.offsets.borrow_mut();
        let group_offsets = table.entry(group.to_string()).or_default();
        for (partition, committed) in entries {
            group_offsets.insert(partition, committed);
        }
        Ok(())
    }

    /// Deletes committed offsets of `group` (all of them, and its group record, when
    /// `partitions` is None) with durable tombstones. Returns the partitions that had a commit.
    pub(super) async fn delete_offsets(
        &self,
        group: &str,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<Vec<TopicPartition>> {
        let _guard = self.offsets_lock.lock().await;
        let existing: Vec<TopicPartition> = {
            let table = self.offsets.borrow();
            match (table.get(group), &partitions) {
                (None, _) => Vec::new(),
                (Some(map), None) => map.keys().cloned().collect(),
                (Some(map), Some(wanted)) => {
                    wanted.iter().filter(|key| map.contains_key(*key)).cloned().collect()
                }
            }
        };
        let cell = self.groups.borrow().get(group).cloned();
        let group_record = partitions.is_none()
            && cell.as_ref().is_some_and(|cell| cell.group.borrow().stored_value.is_some());
        if existing.is_empty() && !group_record {
            return Ok(existing);
        }
        let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            existing.iter().map(|partition| (record_key(group, partition), None)).collect();
        if group_record {
            records.push((stored::key(group), None));
        }
        self.append_records(group, &records).await?;
        if let (true, Some(cell)) = (group_record, cell) {
            cell.group.borrow_mut().stored_value = None;
        }
        let mut table = self.offsets.borrow_mut();
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
    /// failure the group stays dirty so the tick tries again.
    pub(super) async fn store_group(&self, group: &str) -> Result<()> {
        let _guard = self.offsets_lock.lock().await;
        let cell: Option<Rc<GroupCell>> = self.groups.borrow().get(group).cloned();
        let value = cell.as_ref().map(|cell| {
            let mut live = cell.group.borrow_mut();
            live.dirty = false;
            Bytes::from(stored::StoredGroup::of(&live).encode())
        });
        let record = (stored::key(group), value.as_ref().map(|v| v.to_vec()));
        let appended = self.append_records(group, &[record]).await;
        if let Some(cell) = cell {
            let mut live = cell.group.borrow_mut();
            match appended {
                Ok(()) => live.stored_value = value,
                Err(_) => live.dirty = true,
            }
        }
        appended
    }

    /// Bounds an `__consumer_offsets` partition: once it holds more than `compact_bytes`, the
    /// active segment is rolled, the live entries of the groups on that partition are appended
    /// again (durably), and the log start moves to them, which deletes every older segment. What
    /// a replay then reads is exactly the live table. (Kafka gets the same from log compaction.)
    pub(super) async fn compact(&self, partition: &TopicPartition) -> Result<bool> {
        let Some(owned) = self.partitions.local(partition) else { return Ok(false) };
        if owned.log.size_bytes() <= self.config.offsets_compact_bytes
            || self.has_pending_on(partition.partition.0)
        {
            return Ok(false);
        }
        let _guard = self.offsets_lock.lock().await;
        let index = partition.partition.0;
        let live: Vec<(Vec<u8>, Vec<u8>)> = self
            .offsets
            .borrow()
            .iter()
            .filter(|(group, _)| partition_for_group(group) == index)
            .flat_map(|(group, map)| {
                map.iter()
                    .map(move |(key, committed)| (record_key(group, key), record_value(committed)))
            })
            .chain(self.groups.borrow().iter().filter_map(|(group, cell)| {
                let stored = cell.group.borrow().stored_value.clone()?;
                (partition_for_group(group) == index).then(|| (stored::key(group), stored.to_vec()))
            }))
            .chain(self.consumer_records_of(index))
            .chain(self.share_records_of(index))
            .collect();
        let now = self.clock.now_ms();
        owned.log.roll(now).await?;
        let mut first_base = owned.log.log_end_offset();
        for (chunk_index, chunk) in live.chunks(COMPACTION_BATCH_RECORDS_MAX).enumerate() {
            let mut builder = wire::RecordBatchBuilder::new(now);
            for (key, value) in chunk {
                builder.push(wire::BatchRecord {
                    key: Some(key),
                    value: Some(value),
                    timestamp_delta: 0,
                });
            }
            let info = owned
                .log
                .append_with(BytesMut::from(&builder.build()[..]), owned.leader_epoch(), now, true)
                .await?;
            if chunk_index == 0 {
                first_base = info.base_offset;
            }
        }
        owned.delete_records_before(first_base).await?;
        tracing::info!(
            partition = index,
            live = live.len(),
            log_start = first_base,
            "compacted committed offsets"
        );
        Ok(true)
    }

    /// Rebuilds the offsets table and the stored groups from the `__consumer_offsets`
    /// partitions this shard leads; returns the records applied.
    pub async fn replay(&self) -> Result<usize, String> {
        let mut applied = 0;
        let mut groups: HashMap<String, Option<Vec<u8>>> = HashMap::new();
        for (partition, owned) in self.partitions.local_of_topic(OFFSETS_TOPIC) {
            applied += self.replay_partition(&partition, &owned.log, &mut groups).await;
            self.loaded.borrow_mut().insert(partition);
        }
        // Groups whose every offset was deleted have none.
        self.offsets.borrow_mut().retain(|_, map| !map.is_empty());
        self.restore_groups(groups);
        self.arm_loaded_consumer_groups();
        Ok(applied)
    }

    /// Follows leadership of `__consumer_offsets` partitions (after every image): one this
    /// shard now leads is replayed (the new coordinator loads its groups from the replicated
    /// log), and the groups and offsets of one it no longer leads are dropped here.
    pub async fn follow_leadership(&self) {
        let version = self.partitions.roles_version();
        if self.roles_seen.replace(version) == version {
            return;
        }
        let led: Vec<(TopicPartition, Rc<crate::services::partitions::Partition<S>>)> =
            self.partitions.local_of_topic(OFFSETS_TOPIC);
        let led_keys: std::collections::HashSet<TopicPartition> =
            led.iter().map(|(key, _)| key.clone()).collect();
        let lost: Vec<TopicPartition> =
            self.loaded.borrow().iter().filter(|key| !led_keys.contains(*key)).cloned().collect();
        for partition in lost {
            let index = partition.partition.0;
            self.groups.borrow_mut().retain(|group, _| partition_for_group(group) != index);
            self.consumer_groups
                .borrow_mut()
                .retain(|group, _| partition_for_group(group) != index);
            self.share_groups.borrow_mut().retain(|group, _| partition_for_group(group) != index);
            self.offsets.borrow_mut().retain(|group, _| partition_for_group(group) != index);
            self.forget_pending_of(index);
            self.loaded.borrow_mut().remove(&partition);
            tracing::info!(%partition, "no longer coordinating the groups of this partition");
        }
        for (partition, owned) in led {
            if self.loaded.borrow().contains(&partition) {
                continue;
            }
            let _guard = self.offsets_lock.lock().await;
            let mut groups = HashMap::new();
            let applied = self.replay_partition(&partition, &owned.log, &mut groups).await;
            self.offsets.borrow_mut().retain(|_, map| !map.is_empty());
            self.restore_groups(groups);
            self.arm_loaded_consumer_groups();
            self.loaded.borrow_mut().insert(partition.clone());
            tracing::info!(%partition, records = applied, "coordinating the groups of this partition");
        }
    }

    /// Replays one `__consumer_offsets` partition. What cannot be read is logged, counted
    /// (`strata_offsets_replay_skipped_total`) and skipped, so a bad batch never keeps the
    /// broker from starting: a batch whose records do not decode is passed over, and a read
    /// error ends this partition's replay there.
    async fn replay_partition(
        &self,
        partition: &TopicPartition,
        log: &shard::PartitionLog<S>,
        groups: &mut HashMap<String, Option<Vec<u8>>>,
    ) -> usize {
        let mut applied = 0;
        let mut offset = log.log_start_offset();
        while offset < log.log_end_offset() {
            let read = match log.read(offset, REPLAY_READ_BYTES).await {
                Ok(read) if !read.batches.is_empty() => read,
                Ok(_) => break,
                Err(error) => {
                    tracing::error!(%partition, offset, %error, "offsets replay stopped: unreadable");
                    self.stats.offsets_replay_skipped(1);
                    break;
                }
            };
            for batch in read.batches {
                let Ok(header) =
                    wire::RecordBatchHeader::parse(&batch, shard::config::BATCH_BYTES_MAX)
                else {
                    break; // the log checked it; cannot happen
                };
                offset = header.last_offset() + 1;
                if header.is_control() {
                    // A transaction's marker: its offsets committed in it become visible, or go.
                    if let Some(marker) = wire::txn_marker::parse_marker(&header) {
                        let index = partition.partition.0;
                        self.complete_pending(index, header.producer_id(), marker.commit);
                    }
                    continue;
                }
                match wire::compression::records_of(&header) {
                    Ok(records) if header.is_transactional() => {
                        applied += self.hold_pending(header.producer_id(), records)
                    }
                    Ok(records) => applied += self.replay_records(records, groups),
                    Err(error) => {
                        tracing::warn!(
                            %partition,
                            offset = header.base_offset(),
                            %error,
                            "offsets replay skipped a batch whose records do not decode"
                        );
                        self.stats.offsets_replay_skipped(1);
                    }
                }
            }
        }
        applied
    }

    /// Holds the offsets of a transactional batch met in replay until its marker.
    fn hold_pending(
        &self,
        producer_id: i64,
        records: Vec<wire::compression::OwnedRecord>,
    ) -> usize {
        let mut pending = self.pending_txn.borrow_mut();
        let held = pending.entry(producer_id).or_default();
        let mut applied = 0;
        for record in records {
            let Some((group, partition)) = record.key.as_deref().and_then(parse_key) else {
                continue;
            };
            let Some(committed) = record.value.as_deref().and_then(parse_value) else { continue };
            held.retain(|(g, p, _)| !(g == &group && p == &partition));
            held.push((group, partition, committed));
            applied += 1;
        }
        applied
    }

    fn replay_records(
        &self,
        records: Vec<wire::compression::OwnedRecord>,
        groups: &mut HashMap<String, Option<Vec<u8>>>,
    ) -> usize {
        let mut applied = 0;
        let mut table = self.offsets.borrow_mut();
        for record in records {
            if let Some(key) =
                record.key.as_deref().filter(|k| consumer_records::is_consumer_group_key(k))
            {
                applied += usize::from(self.replay_consumer_record(key, record.value.as_deref()));
                continue;
            }
            if let Some(key) =
                record.key.as_deref().filter(|k| share_records::is_share_group_key(k))
            {
                applied += usize::from(self.replay_share_record(key, record.value.as_deref()));
                continue;
            }
            if let Some(group) = record.key.as_deref().and_then(stored::parse_key) {
                groups.insert(group, record.value);
                applied += 1;
                continue;
            }
            let Some((group, partition)) = record.key.as_deref().and_then(parse_key) else {
                continue;
            };
            let group_offsets = table.entry(group).or_default();
            match record.value.as_deref().and_then(parse_value) {
                Some(committed) => group_offsets.insert(partition, committed),
                None => group_offsets.remove(&partition),
            };
            applied += 1;
        }
        applied
    }

    /// Applies one KIP-848 record met in replay to its consumer group (a record that does not
    /// parse, or that contradicts the group, is logged and counted).
    fn replay_consumer_record(&self, key: &[u8], value: Option<&[u8]>) -> bool {
        let Some((group_id, record)) = consumer_records::decode(key, value) else {
            tracing::warn!("offsets replay skipped an unreadable consumer group record");
            self.stats.offsets_replay_skipped(1);
            return false;
        };
        let cell = self
            .consumer_groups
            .borrow_mut()
            .entry(group_id.clone())
            .or_insert_with(|| {
                let group = super::consumer::ConsumerGroup::new(&group_id);
                Rc::new(super::consumer_coordinator::ConsumerCell::with(group))
            })
            .clone();
        if let Err(error) = cell.group.borrow_mut().apply(&record) {
            tracing::warn!(group = %group_id, %error, "consumer group record contradicts the group");
            self.stats.offsets_replay_skipped(1);
        }
        true
    }

    /// The records of the consumer groups on `__consumer_offsets` partition `index`, as a
    /// compaction rewrites them.
    fn consumer_records_of(&self, index: i32) -> Vec<(Vec<u8>, Vec<u8>)> {
        let groups = self.consumer_groups.borrow();
        let mut live = Vec::new();
        for (group_id, cell) in groups.iter().filter(|(g, _)| partition_for_group(g) == index) {
            for record in cell.group.borrow().snapshot() {
                if let (key, Some(value)) = consumer_records::encode(group_id, &record) {
                    live.push((key, value));
                }
            }
        }
        live
    }

    /// Brings back the groups whose last metadata record survived replay: with members as
    /// Stable (sessions restart now), without members only while they still have committed
    /// offsets.
    fn restore_groups(&self, records: HashMap<String, Option<Vec<u8>>>) {
        let now = self.clock.now();
        let offsets = self.offsets.borrow();
        let mut groups = self.groups.borrow_mut();
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
            groups.insert(name, Rc::new(GroupCell::with(group)));
        }
    }

    /// Expires committed offsets of groups without members whose last commit is older than
    /// `offsets.retention.ms` (Kafka's offsets.retention.minutes), with durable tombstones.
    pub(super) async fn expire_offsets(&self) {
        let horizon = self.clock.now_ms() - self.config.offsets_retention_ms as i64;
        let expired: Vec<(String, Vec<TopicPartition>)> = {
            let table = self.offsets.borrow();
            let groups = self.groups.borrow();
            let consumer_groups = self.consumer_groups.borrow();
            table
                .iter()
                .filter(|(group, _)| {
                    groups.get(*group).is_none_or(|cell| cell.group.borrow().members.is_empty())
                        && consumer_groups
                            .get(*group)
                            .is_none_or(|cell| cell.group.borrow().members.is_empty())
                })
                .map(|(group, map)| {
                    let old = map
                        .iter()
                        .filter(|(_, c)| c.commit_ms < horizon)
                        .map(|(k, _)| k.clone())
                        .collect::<Vec<_>>();
                    (group.clone(), old)
                })
                .filter(|(_, old)| !old.is_empty())
                .collect()
        };
        for (group, partitions) in expired {
            match self.delete_offsets(&group, Some(partitions)).await {
                Ok(deleted) => {
                    tracing::info!(%group, partitions = deleted.len(), "expired committed offsets")
                }
                Err(error) => tracing::warn!(%group, %error, "expiring committed offsets failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let committed =
            Committed { offset: 42, metadata: "meta".into(), commit_ms: 7, leader_epoch: 3 };
        assert_eq!(parse_value(&record_value(&committed)), Some(committed));
        // A value written before leader epochs were stored: offset, commit time, metadata.
        let mut old = Vec::new();
        old.extend_from_slice(&42i64.to_be_bytes());
        old.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        old.extend_from_slice(b"meta");
        let parsed = parse_value(&old).expect("old layout");
        assert_eq!(
            (parsed.offset, parsed.commit_ms, parsed.leader_epoch),
            (42, 1_700_000_000_000, -1)
        );
        assert_eq!(parsed.metadata, "meta");
        let partition = TopicPartition::new("t-1", 3);
        assert_eq!(parse_key(&record_key("g", &partition)), Some(("g".into(), partition)));
        assert_eq!(parse_key(b"no separators"), None);
    }
}
