//! Cross-core routing: requests for a partition go to the shard that owns it, metadata changes
//! go to shard 0, and snapshots go from shard 0 to every shard.
//!
//! Owns: the messages shards exchange (`ShardRequest`, `ShardResponse`), `call` (a request to
//! any shard, answered in place when it is this one), the receive loops, and the owner-side
//! handling of each request.
//! Invariants: record data crosses cores as `Bytes` (shared, never re-encoded); a request's
//! answer returns to the shard that asked; the mesh's bounded channels back-pressure senders.
//! Runs on: every shard.

use crate::error::{BrokerError, Result};
use crate::metadata::{self, MetadataSnapshot, TopicMetadata};
use crate::state::Shard;
use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use wire::record_batch::peek_batch;

/// Messages on the mesh.
pub enum ShardMessage {
    Request { id: u64, from: usize, body: ShardRequest },
    Response { id: u64, body: ShardResponse },
}

pub enum ShardRequest {
    Append {
        topic: String,
        partition: i32,
        records: Bytes,
        sync: bool,
    },
    Read {
        topic: String,
        partition: i32,
        offset: i64,
        max_bytes: usize,
        wait_ms: u64,
    },
    ListOffset {
        topic: String,
        partition: i32,
        timestamp: i64,
    },
    DeleteRecords {
        topic: String,
        partition: i32,
        offset: i64,
    },
    /// To shard 0 only.
    ChangeMetadata(MetadataChange),
    ApplySnapshot(MetadataSnapshot),
    Stats,
    /// To the shard owning the group's `__consumer_offsets` partition.
    CommitOffsets {
        group: String,
        member_id: String,
        instance_id: Option<String>,
        generation: i32,
        entries: Vec<(String, i32, crate::group::Committed)>,
    },
    Group(GroupCall),
    /// Deletes a group's offsets (all, or some partitions); refused while it has members.
    DeleteOffsets {
        group: String,
        partitions: Option<Vec<(String, i32)>>,
    },
    /// `None`: every committed partition of the group.
    FetchOffsets {
        group: String,
        wanted: Option<Vec<(String, i32)>>,
    },
    ListGroups,
    /// (topic, partition, bytes on disk) of every partition the shard owns.
    LogSizes,
    /// The idempotent producers of one partition.
    Producers {
        topic: String,
        partition: i32,
    },
    /// A producer id (shard 0 allocates them).
    InitProducerId {
        producer_id: i64,
        epoch: i16,
    },
}

/// A group-membership request for the coordinating shard.
pub enum GroupCall {
    Join(crate::group::coordinator::JoinRequest),
    Sync {
        group: String,
        member_id: String,
        instance_id: Option<String>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
    },
    Heartbeat {
        group: String,
        member_id: String,
        instance_id: Option<String>,
        generation: i32,
    },
    Leave {
        group: String,
        member_ids: Vec<String>,
    },
    Describe {
        group: String,
    },
    States,
}

pub enum GroupAnswer {
    Join(crate::group::membership::JoinOutcome),
    Sync(i16, Bytes, String, String),
    Code(i16),
    Codes(Vec<i16>),
    Described(Option<crate::group::coordinator::Described>),
    States(Vec<(String, String)>),
}

pub enum ShardResponse {
    /// Error code (for the group), and the partitions whose offsets were deleted.
    DeleteOffsets(i16, Vec<(String, i32)>),
    Group(GroupAnswer),
    CommitOffsets(Result<()>),
    FetchOffsets(Vec<(String, i32, crate::group::Committed)>),
    Groups(Vec<String>),
    ProducerId(Result<(i64, i16)>),
    LogSizes(Vec<(String, i32, u64)>),
    Producers(Result<Vec<(i64, i16, i32, i64)>>),
    Stats(Box<StatsReport>),
    Append(Result<AppendResult>),
    Read(Result<ReadResult>),
    ListOffset(Result<Option<(i64, i64)>>),
    DeleteRecords(Result<i64>),
    ChangeMetadata(Vec<Result<()>>),
    Applied(Result<(), String>),
    Unavailable(String),
}

/// One shard's counters, histograms and partition offsets, for `/metrics`.
pub struct StatsReport {
    pub stats: crate::state::ShardStats,
    /// (topic, partition, log start, log end) of each owned partition.
    pub offsets: Vec<(String, i32, i64, i64)>,
    pub fsync_latency_us: hdrhistogram::Histogram<u64>,
    /// Mesh requests this shard is waiting on.
    pub pending_requests: u64,
    /// (group, topic, partition, committed offset) of the groups this shard coordinates.
    pub committed: Vec<(String, String, i32, i64)>,
}

pub struct AppendResult {
    pub base_offset: i64,
    pub log_start_offset: i64,
}

pub struct ReadResult {
    pub batches: Vec<Bytes>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// A change to the topic table, applied by shard 0.
pub enum MetadataChange {
    CreateTopics(Vec<CreateTopic>),
    DeleteTopics(Vec<String>),
    CreatePartitions(Vec<(String, i32, bool)>),
    AlterConfigs(Vec<(String, ConfigEdit, bool)>),
}

pub struct CreateTopic {
    pub name: String,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
    pub validate_only: bool,
}

pub enum ConfigEdit {
    /// AlterConfigs: the overrides become exactly these.
    Replace(BTreeMap<String, String>),
    /// IncrementalAlterConfigs: (key, op, value) with op 0 SET, 1 DELETE (APPEND/SUBTRACT apply to
    /// list configs, which strata has none of yet).
    Incremental(Vec<(String, i8, Option<String>)>),
}

/// Sends `request` to `target` and waits for its answer (handled in place for this shard).
pub async fn call(shard: &Rc<Shard>, target: usize, request: ShardRequest) -> ShardResponse {
    if target == shard.id {
        return handle(shard.clone(), request).await;
    }
    let id = shard.next_request_id.get();
    shard.next_request_id.set(id + 1);
    if !matches!(
        request,
        ShardRequest::Stats | ShardRequest::ApplySnapshot(_) | ShardRequest::ListGroups
    ) {
        shard.stats.borrow_mut().routed_out += 1;
    }
    let (sender, receiver) = futures_channel::oneshot::channel();
    shard.pending.borrow_mut().insert(id, sender);
    let message = ShardMessage::Request { id, from: shard.id, body: request };
    if shard.senders.send_to(target, message).await.is_err() {
        shard.pending.borrow_mut().remove(&id);
        return ShardResponse::Unavailable(format!("shard {target} channel closed"));
    }
    receiver.await.unwrap_or_else(|_| {
        ShardResponse::Unavailable(format!("shard {target} dropped the request"))
    })
}

/// Runs the receive loop for messages from `peer`.
pub async fn receive_loop(
    shard: Rc<Shard>,
    peer: usize,
    receiver: shard::runtime::mesh::Receiver<ShardMessage>,
) {
    while let Some(message) = receiver.recv().await {
        match message {
            ShardMessage::Request { id, from, body } => {
                if !matches!(
                    body,
                    ShardRequest::Stats | ShardRequest::ApplySnapshot(_) | ShardRequest::ListGroups
                ) {
                    shard.stats.borrow_mut().routed_in += 1;
                }
                let shard = shard.clone();
                shard::runtime::spawn(async move {
                    let response = handle(shard.clone(), body).await;
                    if shard
                        .senders
                        .send_to(from, ShardMessage::Response { id, body: response })
                        .await
                        .is_err()
                    {
                        tracing::warn!(from, "could not answer a shard request: channel closed");
                    }
                })
                .detach();
            }
            ShardMessage::Response { id, body } => {
                let waiter = shard.pending.borrow_mut().remove(&id);
                if let Some(waiter) = waiter {
                    let _ = waiter.send(body);
                }
            }
        }
    }
    tracing::debug!(peer, "mesh channel closed");
}

fn unknown(topic: &str, partition: i32) -> BrokerError {
    BrokerError::UnknownTopicOrPartition(format!("{topic}-{partition}"))
}

/// Handles a request on the shard that owns its subject. Boxed, because metadata changes call
/// back into `call` (shard 0 publishing to every shard, itself included).
fn handle(
    shard: Rc<Shard>,
    request: ShardRequest,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ShardResponse>>> {
    Box::pin(handle_inner(shard, request))
}

async fn handle_inner(shard: Rc<Shard>, request: ShardRequest) -> ShardResponse {
    match request {
        ShardRequest::Append { topic, partition, records, sync } => {
            ShardResponse::Append(append(&shard, &topic, partition, records, sync).await)
        }
        ShardRequest::Read { topic, partition, offset, max_bytes, wait_ms } => {
            ShardResponse::Read(read(&shard, &topic, partition, offset, max_bytes, wait_ms).await)
        }
        ShardRequest::ListOffset { topic, partition, timestamp } => {
            ShardResponse::ListOffset(list_offset(&shard, &topic, partition, timestamp).await)
        }
        ShardRequest::DeleteRecords { topic, partition, offset } => {
            let result = match shard.partition(&topic, partition) {
                None => Err(unknown(&topic, partition)),
                Some(state) => {
                    let target = if offset == -1 { state.log.log_end_offset() } else { offset };
                    state.log.delete_records_before(target).await.map_err(BrokerError::from)
                }
            };
            ShardResponse::DeleteRecords(result)
        }
        ShardRequest::Producers { topic, partition } => ShardResponse::Producers(
            shard
                .partition(&topic, partition)
                .map(|state| state.log.active_producers())
                .ok_or_else(|| unknown(&topic, partition)),
        ),
        ShardRequest::LogSizes => ShardResponse::LogSizes(
            shard
                .partitions
                .borrow()
                .iter()
                .map(|((topic, partition), state)| {
                    (topic.clone(), *partition, state.log.size_bytes())
                })
                .collect(),
        ),
        ShardRequest::InitProducerId { producer_id, epoch } => ShardResponse::ProducerId(
            crate::producer_ids::init_producer_id(&shard, producer_id, epoch).await,
        ),
        ShardRequest::ChangeMetadata(change) => {
            ShardResponse::ChangeMetadata(change_metadata(&shard, change).await)
        }
        ShardRequest::ApplySnapshot(snapshot) => {
            ShardResponse::Applied(shard.apply_snapshot(snapshot).await)
        }
        ShardRequest::CommitOffsets { group, member_id, instance_id, generation, entries } => {
            let check = crate::group::coordinator::check_commit(
                &shard,
                &group,
                &member_id,
                instance_id.as_deref(),
                generation,
            );
            match check {
                Some(error) => ShardResponse::CommitOffsets(Err(BrokerError::GroupError(error))),
                None => ShardResponse::CommitOffsets(
                    crate::group::commit(&shard, &group, entries).await,
                ),
            }
        }
        ShardRequest::Group(call) => {
            use crate::group::coordinator as c;
            ShardResponse::Group(match call {
                GroupCall::Join(request) => GroupAnswer::Join(c::join(&shard, request).await),
                GroupCall::Sync { group, member_id, instance_id, generation, assignments } => {
                    let (code, assignment, protocol_type, protocol) = c::sync(
                        &shard,
                        &group,
                        &member_id,
                        instance_id.as_deref(),
                        generation,
                        assignments,
                    )
                    .await;
                    GroupAnswer::Sync(code, assignment, protocol_type, protocol)
                }
                GroupCall::Heartbeat { group, member_id, instance_id, generation } => {
                    GroupAnswer::Code(c::heartbeat(
                        &shard,
                        &group,
                        &member_id,
                        instance_id.as_deref(),
                        generation,
                    ))
                }
                GroupCall::Leave { group, member_ids } => {
                    GroupAnswer::Codes(c::leave(&shard, &group, &member_ids))
                }
                GroupCall::Describe { group } => {
                    GroupAnswer::Described(c::describe(&shard, &group))
                }
                GroupCall::States => GroupAnswer::States(c::states(&shard)),
            })
        }
        ShardRequest::DeleteOffsets { group, partitions } => {
            let members = shard
                .groups
                .borrow()
                .get(&group)
                .map(|cell| cell.group.borrow().members.len())
                .unwrap_or(0);
            let known = shard.offsets.borrow().contains_key(&group) || members > 0;
            if !known {
                ShardResponse::DeleteOffsets(crate::error::code::GROUP_ID_NOT_FOUND, Vec::new())
            } else if members > 0 {
                ShardResponse::DeleteOffsets(crate::error::code::NON_EMPTY_GROUP, Vec::new())
            } else {
                match crate::group::delete(&shard, &group, partitions).await {
                    Ok(deleted) => {
                        if shard.offsets.borrow().get(&group).is_none() {
                            shard.groups.borrow_mut().remove(&group);
                        }
                        ShardResponse::DeleteOffsets(crate::error::code::NONE, deleted)
                    }
                    Err(error) => {
                        ShardResponse::DeleteOffsets(crate::error::error_code(&error), Vec::new())
                    }
                }
            }
        }
        ShardRequest::FetchOffsets { group, wanted } => {
            let table = shard.offsets.borrow();
            let committed = table.get(&group);
            let found = match wanted {
                Some(wanted) => wanted
                    .into_iter()
                    .filter_map(|(topic, partition)| {
                        committed
                            .and_then(|map| map.get(&(topic.clone(), partition)))
                            .map(|entry| (topic, partition, entry.clone()))
                    })
                    .collect(),
                None => committed
                    .map(|map| {
                        map.iter().map(|((t, p), entry)| (t.clone(), *p, entry.clone())).collect()
                    })
                    .unwrap_or_default(),
            };
            ShardResponse::FetchOffsets(found)
        }
        ShardRequest::ListGroups => {
            let table = shard.offsets.borrow();
            ShardResponse::Groups(
                table
                    .iter()
                    .filter(|(_, map)| !map.is_empty())
                    .map(|(group, _)| group.clone())
                    .collect(),
            )
        }
        ShardRequest::Stats => {
            let fsync_latency_us = shard.sync_latency_us.borrow().clone();
            let offsets = shard
                .partitions
                .borrow()
                .iter()
                .map(|((topic, partition), state)| {
                    (
                        topic.clone(),
                        *partition,
                        state.log.log_start_offset(),
                        state.log.log_end_offset(),
                    )
                })
                .collect();
            ShardResponse::Stats(Box::new(StatsReport {
                stats: shard.stats.borrow().clone(),
                offsets,
                fsync_latency_us,
                pending_requests: shard.pending.borrow().len() as u64,
                committed: shard
                    .offsets
                    .borrow()
                    .iter()
                    .flat_map(|(group, map)| {
                        map.iter().map(move |((topic, partition), entry)| {
                            (group.clone(), topic.clone(), *partition, entry.offset)
                        })
                    })
                    .collect(),
            }))
        }
    }
}

/// Splits a produce request's records into batches, checks them all, then appends them.
async fn append(
    shard: &Shard,
    topic: &str,
    partition: i32,
    records: Bytes,
    sync: bool,
) -> Result<AppendResult> {
    let state = shard.partition(topic, partition).ok_or_else(|| unknown(topic, partition))?;
    let mut batches = Vec::new();
    let mut rest = records;
    while !rest.is_empty() {
        let peek = peek_batch(&rest, shard::config::BATCH_BYTES_MAX)
            .map_err(|error| BrokerError::Storage(shard::StorageError::InvalidBatch(error)))?;
        if peek.size_bytes > rest.len() {
            return Err(BrokerError::Storage(shard::StorageError::InvalidBatch(
                wire::DecodeError::Truncated { needed: peek.size_bytes, available: rest.len() },
            )));
        }
        batches.push(rest.split_to(peek.size_bytes));
    }
    if batches.is_empty() {
        return Err(BrokerError::Storage(shard::StorageError::InvalidBatch(
            wire::DecodeError::Truncated { needed: wire::BATCH_HEADER_BYTES, available: 0 },
        )));
    }
    // Every batch is checked (framing and CRC32C) before any is appended, so a request is
    // all-or-nothing; the log then skips the CRC pass it would otherwise repeat.
    let compacted = state.log.config().cleanup_compact;
    let mut records = 0u64;
    for batch in &batches {
        let header = wire::RecordBatchHeader::parse(batch, shard::config::BATCH_BYTES_MAX)
            .map_err(shard::StorageError::from)?;
        header.verify_crc().map_err(shard::StorageError::from)?;
        if header.is_control() {
            return Err(BrokerError::ControlBatchFromClient);
        }
        if header.is_transactional() {
            return Err(BrokerError::TransactionsUnsupported);
        }
        if compacted {
            // Kafka refuses keyless records on compacted topics (they could never be cleaned).
            let mut keyless = false;
            wire::compaction::for_each_record(&header, |record| keyless |= record.key.is_none())
                .map_err(shard::StorageError::from)?;
            if keyless {
                return Err(BrokerError::NullKeyOnCompactedTopic(topic.to_string()));
            }
        }
        records += (header.last_offset() - header.base_offset() + 1).max(0) as u64;
    }
    let sync = sync && state.log.config().flush == shard::FlushPolicy::Always;
    let now = shard::runtime::now_ms();
    let mut base_offset = None;
    let mut bytes = 0u64;
    for batch in batches {
        let length = batch.len() as u64;
        let info = state.log.append_crc_verified(BytesMut::from(&batch[..]), 0, now, sync).await?;
        base_offset.get_or_insert(info.base_offset);
        if info.duplicate {
            // An idempotent producer's retry: already counted when it was first written.
            records -= (info.last_offset - info.base_offset + 1).max(0) as u64;
            shard.stats.borrow_mut().duplicate_batches += 1;
        } else {
            bytes += length;
        }
    }
    {
        let mut stats = shard.stats.borrow_mut();
        stats.add_traffic(topic, 0, records);
        stats.add_traffic(topic, 1, bytes);
    }
    state.appended.notify(usize::MAX);
    Ok(AppendResult {
        base_offset: base_offset.unwrap_or(-1),
        log_start_offset: state.log.log_start_offset(),
    })
}

async fn read(
    shard: &Shard,
    topic: &str,
    partition: i32,
    offset: i64,
    max_bytes: usize,
    wait_ms: u64,
) -> Result<ReadResult> {
    let state = shard.partition(topic, partition).ok_or_else(|| unknown(topic, partition))?;
    if wait_ms > 0 && offset == state.log.log_end_offset() {
        // Long poll: wait for an append (or the deadline) before reading.
        let listener = state.appended.listen();
        if offset == state.log.log_end_offset() {
            futures_lite::future::or(
                async {
                    listener.await;
                },
                shard::runtime::sleep(Duration::from_millis(wait_ms)),
            )
            .await;
        }
    }
    let read = state.log.read(offset, max_bytes).await.inspect_err(|error| {
        if !matches!(error, shard::StorageError::OffsetOutOfRange { .. }) {
            tracing::warn!(%topic, partition, offset, %error, "read failed");
        }
    })?;
    {
        let mut stats = shard.stats.borrow_mut();
        for batch in &read.batches {
            if let Ok(peek) = peek_batch(batch, shard::config::BATCH_BYTES_MAX) {
                stats.add_traffic(
                    topic,
                    2,
                    (peek.last_offset - peek.base_offset + 1).max(0) as u64,
                );
                stats.add_traffic(topic, 3, batch.len() as u64);
            }
        }
    }
    Ok(ReadResult {
        batches: read.batches,
        high_watermark: state.log.log_end_offset(),
        log_start_offset: state.log.log_start_offset(),
    })
}

async fn list_offset(
    shard: &Shard,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<Option<(i64, i64)>> {
    let state = shard.partition(topic, partition).ok_or_else(|| unknown(topic, partition))?;
    match timestamp {
        -2 => Ok(Some((state.log.log_start_offset(), -1))),
        -1 => Ok(Some((state.log.log_end_offset(), -1))),
        timestamp if timestamp >= 0 => Ok(state
            .log
            .offset_for_timestamp(timestamp)
            .await?
            .map(|found| (found.offset, found.timestamp))),
        other => {
            Err(BrokerError::InvalidRequest(format!("unsupported ListOffsets timestamp {other}")))
        }
    }
}

/// Applies a metadata change on shard 0: validate, write the new snapshot to disk, publish it
/// to every shard, then answer.
async fn change_metadata(shard: &Rc<Shard>, change: MetadataChange) -> Vec<Result<()>> {
    assert_eq!(shard.id, 0, "metadata changes are applied by shard 0");
    let _guard = shard.metadata_lock.lock().await;
    let mut next = (*shard.snapshot()).clone();
    let results: Vec<Result<()>> = match change {
        MetadataChange::CreateTopics(creates) => creates
            .into_iter()
            .map(|create| {
                metadata::validate_topic_name(&create.name)?;
                if next.topics.contains_key(&create.name) {
                    return Err(BrokerError::TopicAlreadyExists(create.name));
                }
                if create.partitions < 1 || create.partitions > metadata::PARTITIONS_PER_TOPIC_MAX {
                    return Err(BrokerError::InvalidPartitions(format!(
                        "{} partitions; must be 1..={}",
                        create.partitions,
                        metadata::PARTITIONS_PER_TOPIC_MAX
                    )));
                }
                for (key, value) in &create.configs {
                    metadata::validate_topic_config(key, value)?;
                }
                if !create.validate_only {
                    next.topics.insert(
                        create.name.clone(),
                        TopicMetadata {
                            name: create.name,
                            topic_id: metadata::new_topic_id(),
                            partitions: create.partitions,
                            configs: create.configs,
                        },
                    );
                }
                Ok(())
            })
            .collect(),
        MetadataChange::DeleteTopics(names) => names
            .into_iter()
            .map(|name| next.topics.remove(&name).map(drop).ok_or(BrokerError::UnknownTopicOrPartition(name)))
            .collect(),
        MetadataChange::CreatePartitions(changes) => changes
            .into_iter()
            .map(|(name, count, validate_only)| {
                let topic = next.topics.get_mut(&name).ok_or(BrokerError::UnknownTopicOrPartition(name))?;
                if count <= topic.partitions || count > metadata::PARTITIONS_PER_TOPIC_MAX {
                    return Err(BrokerError::InvalidPartitions(format!(
                        "topic has {} partitions; the new count {count} must be larger (and at most {})",
                        topic.partitions,
                        metadata::PARTITIONS_PER_TOPIC_MAX
                    )));
                }
                if !validate_only {
                    topic.partitions = count;
                }
                Ok(())
            })
            .collect(),
        MetadataChange::AlterConfigs(changes) => changes
            .into_iter()
            .map(|(name, edit, validate_only)| {
                let topic = next.topics.get_mut(&name).ok_or(BrokerError::UnknownTopicOrPartition(name))?;
                let mut configs = topic.configs.clone();
                match edit {
                    ConfigEdit::Replace(replacement) => configs = replacement,
                    ConfigEdit::Incremental(operations) => {
                        for (key, operation, value) in operations {
                            match (operation, value) {
                                (0, Some(value)) => {
                                    configs.insert(key, value);
                                }
                                (1, _) => {
                                    if metadata::default_config(&key).is_none() {
                                        return Err(BrokerError::InvalidConfig(format!("unknown topic config {key:?}")));
                                    }
                                    configs.remove(&key);
                                }
                                (0, None) => {
                                    return Err(BrokerError::InvalidConfig(format!("{key}: SET needs a value")))
                                }
                                (other, _) => {
                                    return Err(BrokerError::InvalidConfig(format!(
                                        "{key}: operation {other} applies to list configs only"
                                    )))
                                }
                            }
                        }
                    }
                }
                for (key, value) in &configs {
                    metadata::validate_topic_config(key, value)?;
                }
                if !validate_only {
                    topic.configs = configs;
                }
                Ok(())
            })
            .collect(),
    };
    if next == *shard.snapshot() {
        return results;
    }
    next.version += 1;
    if let Err(error) = publish(shard, next).await {
        tracing::error!(%error, "publishing topic metadata failed");
        return results
            .into_iter()
            .map(|result| result.and(Err(BrokerError::ShardUnavailable(error.clone()))))
            .collect();
    }
    results
}

/// Persists `snapshot` and hands it to every shard.
async fn publish(shard: &Rc<Shard>, snapshot: MetadataSnapshot) -> Result<(), String> {
    let path = shard.config.data_dir.join(metadata::METADATA_FILE);
    shard::io::write_file_atomic(&shard.storage, &path, &snapshot.to_json())
        .await
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    for target in 0..shard.count {
        match call(shard, target, ShardRequest::ApplySnapshot(snapshot.clone())).await {
            ShardResponse::Applied(Ok(())) => {}
            ShardResponse::Applied(Err(error)) => return Err(format!("shard {target}: {error}")),
            _ => return Err(format!("shard {target} did not apply the snapshot")),
        }
    }
    Ok(())
}

/// Asks shard 0 to apply `change`.
pub async fn request_change(shard: &Rc<Shard>, change: MetadataChange) -> Vec<Result<()>> {
    match call(shard, 0, ShardRequest::ChangeMetadata(change)).await {
        ShardResponse::ChangeMetadata(results) => results,
        ShardResponse::Unavailable(reason) => vec![Err(BrokerError::ShardUnavailable(reason))],
        _ => vec![Err(BrokerError::ShardUnavailable("unexpected answer from shard 0".into()))],
    }
}
