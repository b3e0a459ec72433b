//! Append on the owner shard: a produce request's records for the partitions one shard owns
//! arrive as one message, split into batches the produce handler framed (`wire::FramedBatch`:
//! each header parsed once), whose CRC32Cs are verified here (`wire::CheckedBatch`; their
//! headers are read, never parsed again). Each
//! partition takes its place in its append order on arrival (`order`), and every batch is
//! checked (no control batch, a producer's sequence, then Kafka's log validator over its records,
//! `wire::validate`, and keys on compacted topics) before any is appended, so a request is
//! all-or-nothing, then appended in order once its turn comes. Compressed batches that inflate
//! past `INLINE_INFLATE_BYTES_MAX` are checked off the shard's latency path, on the offload
//! threads (`shard::runtime::offload`).
//! Durability rule: with `sync` (acks=all) under `flush.policy=always` the answer waits for the
//! group-committed fdatasync that covers the batches, and on a replicated partition then for
//! the high watermark to pass them (every in-sync replica has them durable, `replica`);
//! otherwise they are in the log. The wait
//! comes after the partition's turn is given up, so the next request's batches are appended
//! during this sync and share the next one.

use super::PartitionService;
use crate::error::{BrokerError, Result};
use crate::stats::Traffic;
use bytes::Bytes;
use shard::io::Storage;
use shard::StorageError;
use wire::ids::{Offset, TopicPartition};
use wire::validate::{check_batch, Checked, Fault, TimestampRule};
use wire::{CheckedBatch, CheckedBatchMut, FramedBatch};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    pub base_offset: Offset,
    pub log_start_offset: Offset,
    /// The time the broker stamped the batches with (LogAppendTime topics), else -1.
    pub log_append_time_ms: i64,
}

fn invalid(error: wire::DecodeError) -> BrokerError {
    BrokerError::Storage(StorageError::InvalidBatch(error))
}

/// A partition's records as the produce handler framed them (`FramedBatch::split`), or why
/// they are not batches: that answer comes after the partition's leadership is checked.
pub type Batches = Result<Vec<FramedBatch>>;

/// Splits a partition's records into batches and parses each header, once (the produce
/// handler does, before routing).
pub fn split_batches(records: Bytes) -> Batches {
    FramedBatch::split(records, shard::config::BATCH_BYTES_MAX).map_err(invalid)
}

/// Inflation a compressed batch may cost on the shard itself: batches inflating further are
/// checked on the offload threads (`shard::runtime::offload`), so a decompression bomb
/// (up to `DECOMPRESSED_BYTES_MAX` of inflation) does not stall the shard's other connections.
/// At ~1 GB/s of inflation, 256 KiB is ~0.25 ms of shard time per batch at most.
pub const INLINE_INFLATE_BYTES_MAX: usize = 256 << 10;

fn refused(fault: Fault) -> BrokerError {
    match fault {
        Fault::Corrupt(error) => invalid(error),
        Fault::Invalid(why) => BrokerError::InvalidRecord(why),
        timestamp @ Fault::Timestamp { .. } => {
            BrokerError::InvalidTimestamp { reason: timestamp.to_string(), records: Vec::new() }
        }
        // Only a pass with a smaller budget answers this; the full pass cannot.
        Fault::OverBudget { budget } => {
            BrokerError::InvalidRecord(format!("records inflate past {budget} bytes"))
        }
    }
}

/// Checks a batch's attributes (what needs no records; its framing and CRC were checked when
/// it was split); returns its header.
fn check_attributes(batch: &CheckedBatch) -> Result<wire::RecordBatchHeader<'_>> {
    let header = batch.header();
    if header.is_control() {
        return Err(BrokerError::ControlBatchFromClient);
    }
    // As Kafka's log validator: a producer's batch carries its sequence (only the broker
    // writes sequence-less batches for a producer, transactional offset commits).
    if header.producer_id() >= 0 && header.base_sequence() < 0 {
        return Err(BrokerError::InvalidRecord(format!(
            "invalid sequence number {} for producer {}",
            header.base_sequence(),
            header.producer_id()
        )));
    }
    Ok(header)
}

/// Kafka's log validator on one batch (`wire::validate`), within `budget` of inflation.
fn check_records(
    batch: &CheckedBatch,
    rule: TimestampRule,
    budget: usize,
) -> Result<Checked, Fault> {
    check_batch(&batch.header(), rule, budget)
}

/// Checks every batch before any is appended (so a request is all-or-nothing): framing and CRC,
/// then the records (`wire::validate`). Uncompressed batches and compressed ones that inflate
/// within `INLINE_INFLATE_BYTES_MAX` are checked here; the rest together on an offload thread.
async fn validate(
    partition: &TopicPartition,
    batches: &[CheckedBatch],
    rule: TimestampRule,
    compacted: bool,
) -> Result<Vec<Checked>> {
    let checked = validate_batches(batches, rule).await.map_err(|error| match error {
        // KIP-467: name every record with a timestamp out of bounds, not only the first.
        BrokerError::InvalidTimestamp { reason, .. } => BrokerError::InvalidTimestamp {
            reason,
            records: record_indices(batches, |header, record| {
                !rule.allows(header.base_timestamp().saturating_add(record.timestamp_delta))
            }),
        },
        other => other,
    })?;
    // Kafka refuses keyless records on compacted topics (they could never be cleaned), naming
    // each of them (KIP-467).
    if compacted && checked.iter().any(|batch| batch.keyless) {
        return Err(BrokerError::NullKeyOnCompactedTopic {
            partition: partition.to_string(),
            records: record_indices(batches, |_, record| record.key.is_none()),
        });
    }
    Ok(checked)
}

/// `compression.type` naming a codec (Kafka's LogValidator): every checked batch in another
/// codec is re-compressed into it, on an offload thread (it is a pass over every byte). A batch
/// already in the codec is kept as it is, whatever its level, as in Kafka.
async fn recompressed(
    batches: Vec<CheckedBatch>,
    target: wire::Compression,
    level: Option<i32>,
) -> Result<Vec<CheckedBatch>> {
    if batches.iter().all(|batch| batch.header().compression() == target) {
        return Ok(batches);
    }
    shard::runtime::offload(move || {
        batches
            .into_iter()
            .map(|batch| {
                let header = batch.header();
                if header.compression() == target {
                    return Ok(batch);
                }
                // A new batch: checked as any other (it is parsed once more, here).
                let recompressed = wire::compression::recompress(&header, target, level);
                let bytes = Bytes::from(recompressed.map_err(invalid)?);
                CheckedBatch::check(bytes, shard::config::BATCH_BYTES_MAX).map_err(invalid)
            })
            .collect::<Result<Vec<_>>>()
    })
    .await
    .ok_or_else(|| StorageError::Io(std::io::Error::other("re-compressing did not complete")))?
}

/// The indices, among all records of `batches` in order, of those `refused` picks (an error
/// path only: it decodes the records again).
fn record_indices(
    batches: &[CheckedBatch],
    refused: impl Fn(&wire::RecordBatchHeader<'_>, &wire::compression::OwnedRecord) -> bool,
) -> Vec<i32> {
    let mut indices = Vec::new();
    let mut index = 0i32;
    for batch in batches {
        let header = batch.header();
        for record in wire::compression::records_of(&header).unwrap_or_default() {
            if refused(&header, &record) {
                indices.push(index);
            }
            index = index.saturating_add(1);
        }
    }
    indices
}

async fn validate_batches(batches: &[CheckedBatch], rule: TimestampRule) -> Result<Vec<Checked>> {
    let mut checked = Vec::with_capacity(batches.len());
    let mut deferred = Vec::new();
    for (index, batch) in batches.iter().enumerate() {
        let header = check_attributes(batch)?;
        match check_batch(&header, rule, INLINE_INFLATE_BYTES_MAX) {
            Ok(result) => checked.push(Some(result)),
            Err(Fault::OverBudget { .. }) => {
                checked.push(None);
                deferred.push((index, batch.clone()));
            }
            Err(fault) => return Err(refused(fault)),
        }
    }
    if !deferred.is_empty() {
        let results = shard::runtime::offload(move || {
            deferred
                .into_iter()
                .map(|(index, batch)| (index, check_records(&batch, rule, usize::MAX)))
                .collect::<Vec<_>>()
        })
        .await
        // The check panicked (a bug, logged by the panic hook): nothing was stored, and the
        // client may retry (KAFKA_STORAGE_ERROR), as it would not after INVALID_RECORD.
        .ok_or_else(|| {
            StorageError::Io(std::io::Error::other("the batch check did not complete"))
        })?;
        for (index, result) in results {
            if let Some(slot) = checked.get_mut(index) {
                *slot = Some(result.map_err(refused)?);
            }
        }
    }
    Ok(checked.into_iter().flatten().collect())
}

/// The log's own buffer of a checked batch: the request frame's memory itself when the batch is
/// its only remaining slice (a request carrying one partition's single batch: see the produce
/// handler's `detach_from_frame`; requests with more hold a slice until they are answered),
/// otherwise a copy, so the cache never pins a frame much larger than the batch it counts.
/// A header whose max timestamp disagrees with its records is corrected (and its CRC
/// rewritten), as Kafka's validator does, so the time index and retention see the records'
/// real times.
fn stored_copy(
    batch: CheckedBatch,
    checked: &Checked,
    log_append_time: Option<i64>,
) -> CheckedBatchMut {
    let mut copy = batch.into_mut();
    if let Some(now) = log_append_time {
        copy.set_log_append_time_and_crc(now);
    } else if copy.header().max_timestamp() != checked.max_timestamp {
        copy.set_max_timestamp_and_crc(checked.max_timestamp);
    }
    copy
}

/// One partition's part of a produce request.
struct Append<'a> {
    records: Batches,
    /// acks=all.
    sync: bool,
    timeout_ms: u64,
    transactional_id: Option<&'a str>,
}

impl<S: Storage> PartitionService<S> {
    /// Appends a request's records for several partitions, concurrently across them. Every
    /// partition's place in its append order is taken before anything waits (see `order`), so
    /// this must be the handler's first step on the owner shard.
    pub(super) async fn append_all(
        &self,
        partitions: Vec<(TopicPartition, Batches)>,
        sync: bool,
        timeout_ms: u64,
        transactional_id: Option<&str>,
    ) -> Vec<Result<AppendResult>> {
        let appends: Vec<_> = partitions
            .into_iter()
            .map(|(partition, records)| {
                let taken = self.owned(&partition).map(|owned| {
                    let ticket = owned.order.ticket();
                    (owned, ticket)
                });
                async move {
                    let (owned, ticket) = taken?;
                    let append = Append { records, sync, timeout_ms, transactional_id };
                    self.append(&partition, &owned, ticket, append).await
                }
            })
            .collect();
        futures_util::future::join_all(appends).await
    }

    /// One partition's part of a produce: checked (leadership, ISR, every batch) before
    /// anything is written, appended in the partition's ticket order, then made as durable
    /// as `acks` asks.
    async fn append(
        &self,
        partition: &TopicPartition,
        owned: &std::rc::Rc<super::Partition<S>>,
        ticket: super::order::Ticket,
        append: Append<'_>,
    ) -> Result<AppendResult> {
        let Append { records, sync, timeout_ms, transactional_id } = append;
        let replicated = self.check_role(partition, owned, sync)?;
        let now = self.clock.now_ms();
        let prepared = prepare(partition, owned, records, now).await?;
        let config = owned.log.config();
        let durable = sync && config.flush == shard::FlushPolicy::Always;
        ticket.turn().await;
        self.verify_batches(partition, owned, transactional_id, &prepared.batches).await?;
        // With one replica, consumers read up to the log end. An acks=all append is refused if
        // a write fails before its sync, so it is held back from them until it is synced.
        let hold = (durable && !replicated)
            .then(|| owned.log.hold_until_durable(owned.log.log_end_offset()));
        let written = self.write_batches(owned, prepared, now).await?;
        // In the log: the next request's appends may go on while this one waits for its sync
        // (which then covers both: group commit across requests).
        drop(ticket);
        self.stats.add_traffic(&partition.topic, Traffic::MessagesIn, written.records);
        self.stats.add_traffic(&partition.topic, Traffic::BytesIn, written.bytes);
        if hold.is_none() {
            owned.notify_appended();
        }
        if let (true, Some(target)) = (durable, written.durable_target) {
            owned.log.sync_to(target).await?;
        }
        if let Some(hold) = hold {
            // Synced: readers may see it now.
            drop(hold);
            owned.notify_appended();
        }
        if replicated {
            // Followers fetch it now; the high watermark passes it once the ISR has it durable
            // (the leader's own sync included: acks=1 starts it in the background).
            match (sync, written.durable_target) {
                (true, Some(target)) => {
                    owned.advance_high_watermark(self.node);
                    let timeout = std::time::Duration::from_millis(timeout_ms);
                    owned.wait_committed(partition, self.node, target, timeout).await?;
                }
                _ if config.flush == shard::FlushPolicy::Always => owned.sync_behind(),
                _ => owned.advance_high_watermark(self.node),
            }
        }
        Ok(AppendResult {
            base_offset: Offset(written.base_offset.unwrap_or(-1)),
            log_start_offset: Offset(owned.log.log_start_offset()),
            log_append_time_ms: written.log_append_time.unwrap_or(-1),
        })
    }

    /// This node leads the partition, and acks=all has enough in-sync replicas; whether the
    /// partition is replicated. Checked without cloning the role (this runs for every
    /// partition of every produce).
    fn check_role(
        &self,
        partition: &TopicPartition,
        owned: &super::Partition<S>,
        sync: bool,
    ) -> Result<bool> {
        let role = owned.role.borrow();
        if role.leader != self.node {
            return Err(BrokerError::NotLeader(partition.to_string()));
        }
        // acks=all with too few in-sync replicas is refused before anything is written.
        if sync && role.replicated() && role.isr.len() < role.min_insync {
            return Err(BrokerError::NotEnoughReplicas(format!(
                "{partition}: {} in sync, min.insync.replicas is {}",
                role.isr.len(),
                role.min_insync
            )));
        }
        Ok(role.replicated())
    }

    /// Appends the checked batches in order; what they added to the log.
    async fn write_batches(
        &self,
        owned: &super::Partition<S>,
        prepared: Prepared,
        now: i64,
    ) -> Result<Written> {
        let Prepared { batches, checked, log_append_time } = prepared;
        let mut written = Written {
            records: checked.iter().map(|batch| u64::from(batch.records)).sum(),
            log_append_time,
            ..Written::default()
        };
        // Several batches share the partition's records: the last would become their only slice
        // and take over all of them for itself; held here, each is copied instead.
        let _shared = (batches.len() > 1).then(|| batches[0].clone());
        for (batch, checked) in batches.into_iter().zip(&checked) {
            let length = batch.len() as u64;
            let copy = stored_copy(batch, checked, log_append_time);
            let info = owned.log.append_checked(copy, owned.leader_epoch(), now, false).await?;
            written.base_offset.get_or_insert(info.base_offset);
            written.durable_target = Some(info.last_offset + 1);
            if info.duplicate {
                // An idempotent producer's retry: already counted when it was first written.
                written.records -= (info.last_offset - info.base_offset + 1).max(0) as u64;
                self.stats.duplicate_batch();
            } else {
                written.bytes += length;
            }
        }
        Ok(written)
    }
}

/// A partition's batches, checked and ready to append.
struct Prepared {
    batches: Vec<CheckedBatch>,
    checked: Vec<Checked>,
    log_append_time: Option<i64>,
}

/// What a produce added to one partition's log.
#[derive(Default)]
struct Written {
    base_offset: Option<i64>,
    /// The offset after the last batch appended.
    durable_target: Option<i64>,
    records: u64,
    bytes: u64,
    /// The broker's time stamped on the batches under LogAppendTime.
    log_append_time: Option<i64>,
}

/// Splits and checks a partition's records (`validate`), re-compressed to the topic's
/// `compression.type` when it names a codec.
async fn prepare<S: Storage>(
    partition: &TopicPartition,
    owned: &super::Partition<S>,
    records: Batches,
    now: i64,
) -> Result<Prepared> {
    // The CRCs are verified here, on the owner shard (their headers are not parsed again).
    let batches = records?
        .into_iter()
        .map(|batch| batch.verify().map_err(invalid))
        .collect::<Result<Vec<CheckedBatch>>>()?;
    let config = owned.log.config();
    // Under LogAppendTime the broker's clock replaces the records' times: they are not
    // checked (as in Kafka).
    let rule = if config.log_append_time {
        TimestampRule::ANY
    } else {
        TimestampRule {
            now_ms: now,
            before_max_ms: config.timestamp_before_max_ms,
            after_max_ms: config.timestamp_after_max_ms,
        }
    };
    let log_append_time = config.log_append_time.then_some(now);
    let checked = validate(partition, &batches, rule, config.cleanup_compact).await?;
    let batches = match config.compression {
        Some(target) => recompressed(batches, target, config.compression_level).await?,
        None => batches,
    };
    Ok(Prepared { batches, checked, log_append_time })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::batch_builder::{BatchRecord, RecordBatchBuilder};

    fn frame_with_batch() -> (Bytes, std::ops::Range<usize>) {
        let mut builder = RecordBatchBuilder::new(1_000);
        builder.push(BatchRecord { key: None, value: Some(b"value"), timestamp_delta: 0 });
        let batch = builder.build();
        // A request header's bytes, then the batch: as a produce frame holds them.
        let mut frame = vec![7u8; 40];
        frame.extend_from_slice(&batch);
        (Bytes::from(frame), 40..40 + batch.len())
    }

    fn checked(batch: &CheckedBatch) -> Checked {
        let header = check_attributes(batch).expect("framed");
        check_batch(&header, TimestampRule::ANY, usize::MAX).expect("valid")
    }

    fn check(batch: Bytes) -> CheckedBatch {
        CheckedBatch::check(batch, shard::config::BATCH_BYTES_MAX).expect("a batch")
    }

    #[test]
    fn a_batch_that_is_its_frames_only_slice_is_taken_over_not_copied() {
        let (frame, range) = frame_with_batch();
        let batch = check(frame.slice(range.clone()));
        drop(frame);
        let checked = checked(&batch);
        let address = batch.bytes().as_ptr();
        let stored = stored_copy(batch, &checked, Some(5_000));
        assert_eq!(stored.as_slice().as_ptr(), address, "the frame's memory itself");
        let header =
            wire::RecordBatchHeader::parse(stored.as_slice(), shard::config::BATCH_BYTES_MAX)
                .expect("parses");
        assert_eq!(header.max_timestamp(), 5_000, "patched in place");
        assert!(header.verify_crc().is_ok(), "and its CRC rewritten");
    }

    #[test]
    fn a_batch_sharing_its_frame_is_copied_and_the_frame_left_alone() {
        let (frame, range) = frame_with_batch();
        let batch = check(frame.slice(range.clone()));
        let checked = checked(&batch);
        let stored = stored_copy(batch, &checked, Some(5_000));
        assert_ne!(stored.as_slice().as_ptr(), frame[range.clone()].as_ptr());
        let original =
            wire::RecordBatchHeader::parse(&frame[range], shard::config::BATCH_BYTES_MAX)
                .expect("parses");
        assert_eq!(original.max_timestamp(), 1_000, "the shared frame is not written");
    }
}
