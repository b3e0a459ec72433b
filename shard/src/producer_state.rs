//! Idempotent-producer state of one partition (Kafka's `ProducerStateManager`, KIP-98 and
//! KIP-360): for each producer id, its epoch and the sequence ranges and offsets of its last
//! `BATCHES_PER_PRODUCER_MAX` batches.
//!
//! Rules applied to a batch with a producer id, before it is given offsets (under the log's
//! write lock, so check and append are one step):
//! - same epoch, sequences equal to a cached batch: a retry; the original offsets are returned
//!   and nothing is written;
//! - same epoch, first sequence = last sequence + 1 (wrapping at `i32::MAX`): appended;
//! - otherwise OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - older epoch: INVALID_PRODUCER_EPOCH; newer epoch: must start at sequence 0 (a bumped
//!   producer starts over), else OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - unknown producer: any sequence starts it (Kafka 2.5+: its state may have been removed by
//!   retention, DeleteRecords or expiry, and the producer must be able to go on);
//! - transactions (KIP-98): a transactional batch opens the producer's transaction on this
//!   partition if none is open; a non-transactional batch while one is open is
//!   INVALID_TXN_STATE. A marker (control batch, written for the coordinator) with an older
//!   producer epoch is INVALID_PRODUCER_EPOCH, with an older coordinator epoch
//!   TRANSACTION_COORDINATOR_FENCED; it closes the open transaction, and an aborted one is
//!   remembered `(producer, first offset, last offset, LSO then)` for read_committed readers.
//!
//! Persistence: the state is derived from the log. `PartitionLog` writes a snapshot
//! (`<offset>.snapshot`: the state of every batch below `offset`) at each segment roll and at
//! clean shutdown; opening a log loads the newest readable snapshot at or below the log end and
//! replays only the batches after it. Producers whose last batch fell below the log start
//! (retention, DeleteRecords) or whose last timestamp is older than
//! `producer.id.expiration.ms` are dropped.
//!
//! Producers with an open transaction are never expired or evicted.
//!
//! Snapshot format (big-endian): magic `SPS2`, offset i64, producer count u32, then per
//! producer: id i64, epoch i16, last timestamp i64, coordinator epoch i32, open transaction's
//! first offset i64 (-1 none), batch count u8, batches (first sequence i32, last sequence i32,
//! base offset i64, last offset i64); then the aborted transactions: count u32, each producer
//! id i64, first offset i64, last offset i64, last stable offset i64; then CRC32C of all
//! before it. `SPS1` (no transaction fields, no aborted list) is still read.

use crate::error::StorageError;
use std::collections::{BTreeMap, HashMap, VecDeque};
use wire::RecordBatchHeader;

/// Batches remembered per producer (Kafka keeps 5: a producer has at most 5 in flight).
pub const BATCHES_PER_PRODUCER_MAX: usize = 5;
/// Kafka's `producer.id.expiration.ms` default (1 day).
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 86_400_000;
/// Producers tracked per partition before the least recently used is dropped.
pub const PRODUCERS_PER_PARTITION_MAX: usize = 100_000;
/// Snapshot file suffix.
pub const SNAPSHOT_SUFFIX: &str = "snapshot";

const MAGIC: &[u8; 4] = b"SPS2";
const MAGIC_V1: &[u8; 4] = b"SPS1";
/// Aborted transactions a snapshot may hold (a bound on what a damaged file can ask for).
const ABORTED_TXNS_MAX: usize = 1 << 26;

/// A producer a partition tracks, as DescribeProducers reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence written (-1 before any batch of this epoch).
    pub last_sequence: i32,
    pub last_timestamp: i64,
    /// The first offset of its transaction open on this partition, if one is.
    pub txn_first_offset: Option<i64>,
}

/// One remembered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub base_offset: i64,
    pub last_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Largest batch timestamp seen (Kafka's `lastTimestamp`), for expiry.
    pub last_timestamp: i64,
    /// Oldest first, at most `BATCHES_PER_PRODUCER_MAX`.
    pub batches: VecDeque<BatchMetadata>,
    /// The coordinator epoch of the last marker (-1 none): older coordinators are fenced.
    pub coordinator_epoch: i32,
    /// The first offset of the producer's open transaction on this partition.
    pub txn_first_offset: Option<i64>,
}

impl ProducerEntry {
    fn new(epoch: i16, last_timestamp: i64) -> Self {
        ProducerEntry {
            epoch,
            last_timestamp,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            txn_first_offset: None,
        }
    }
}

/// A data batch or a transaction marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    Data { transactional: bool },
    Marker(wire::txn_marker::EndTxnMarker),
}

/// The idempotence fields of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub max_timestamp: i64,
    pub kind: BatchKind,
}

impl ProducerBatch {
    /// `None` for a batch without a producer id (not idempotent), and for a control batch
    /// that is not a transaction marker.
    pub fn of(header: &RecordBatchHeader<'_>) -> Option<Self> {
        if header.producer_id() < 0 {
            return None;
        }
        let kind = if header.is_control() {
            BatchKind::Marker(wire::txn_marker::parse_marker(header)?)
        } else {
            BatchKind::Data { transactional: header.is_transactional() }
        };
        let first_sequence = header.base_sequence();
        Some(ProducerBatch {
            producer_id: header.producer_id(),
            epoch: header.producer_epoch(),
            first_sequence,
            last_sequence: add_sequence(first_sequence, header.last_offset_delta()),
            max_timestamp: header.max_timestamp(),
            kind,
        })
    }

    fn is_transactional(&self) -> bool {
        matches!(self.kind, BatchKind::Data { transactional: true })
    }
}

/// An aborted transaction of this partition (Kafka's `AbortedTxn`): its records lie in
/// `first_offset..last_offset` (the marker's offset), and `last_stable_offset` was the LSO once
/// it was aborted (every transaction recorded after it starts at or above that offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

/// What to do with a batch that passed the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Append,
    /// A retry of a batch already in the log at these offsets.
    Duplicate(BatchMetadata),
}

/// `sequence + delta`, wrapping past `i32::MAX` to 0 as Kafka's sequences do.
pub fn add_sequence(sequence: i32, delta: i32) -> i32 {
    let sum = i64::from(sequence) + i64::from(delta);
    (sum % (i64::from(i32::MAX) + 1)) as i32
}

/// The producer state of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset → producer id.
    ongoing: BTreeMap<i64, i64>,
    /// Closed transactions whose marker may not be below the high watermark yet: first offset
    /// → marker offset (in memory only; dropped as the high watermark passes the marker).
    unreplicated: BTreeMap<i64, i64>,
    /// Aborted transactions, in marker order (so by last offset).
    aborted: Vec<AbortedTxn>,
}

impl ProducerStates {
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// (producer id, epoch, last sequence, last timestamp) of every producer, by id.
    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut out: Vec<ActiveProducer> = self
            .producers
            .iter()
            .map(|(id, entry)| ActiveProducer {
                producer_id: *id,
                epoch: entry.epoch,
                last_sequence: entry.batches.back().map_or(-1, |b| b.last_sequence),
                last_timestamp: entry.last_timestamp,
                txn_first_offset: entry.txn_first_offset,
            })
            .collect();
        out.sort_unstable_by_key(|producer| producer.producer_id);
        out
    }

    /// Checks a batch against the rules in the module header.
    pub fn check(&self, batch: &ProducerBatch) -> Result<Verdict, StorageError> {
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            return Ok(Verdict::Append);
        };
        if batch.epoch < entry.epoch {
            return Err(StorageError::InvalidProducerEpoch {
                producer_id: batch.producer_id,
                epoch: batch.epoch,
                current_epoch: entry.epoch,
            });
        }
        if let BatchKind::Marker(marker) = batch.kind {
            if marker.coordinator_epoch < entry.coordinator_epoch {
                return Err(StorageError::TransactionCoordinatorFenced {
                    producer_id: batch.producer_id,
                    coordinator_epoch: marker.coordinator_epoch,
                    current: entry.coordinator_epoch,
                });
            }
            return Ok(Verdict::Append);
        }
        if batch.first_sequence < 0 {
            // No sequence: a batch the broker writes for a producer (a transactional offset
            // commit); only its epoch is checked, as Kafka's coordinator-origin appends.
            return Ok(Verdict::Append);
        }
        if batch.epoch == entry.epoch
            && !batch.is_transactional()
            && entry.txn_first_offset.is_some()
        {
            return Err(StorageError::InvalidTxnState {
                producer_id: batch.producer_id,
                reason: "a non-transactional batch while its transaction is open",
            });
        }
        let out_of_order = |expected: i32| StorageError::OutOfOrderSequence {
            producer_id: batch.producer_id,
            sequence: batch.first_sequence,
            expected,
        };
        if batch.epoch > entry.epoch {
            return if batch.first_sequence == 0 {
                Ok(Verdict::Append)
            } else {
                Err(out_of_order(0))
            };
        }
        if let Some(original) = entry.batches.iter().find(|cached| {
            cached.first_sequence == batch.first_sequence
                && cached.last_sequence == batch.last_sequence
        }) {
            return Ok(Verdict::Duplicate(*original));
        }
        let expected = entry.batches.back().map_or(0, |last| add_sequence(last.last_sequence, 1));
        if batch.first_sequence == expected {
            Ok(Verdict::Append)
        } else {
            Err(out_of_order(expected))
        }
    }

    /// Records a batch now in the log at `base_offset..=last_offset` (after `check` allowed
    /// it, or while replaying the log, where no check applies).
    pub fn record(&mut self, batch: &ProducerBatch, base_offset: i64, last_offset: i64) {
        if !self.producers.contains_key(&batch.producer_id)
            && self.producers.len() >= PRODUCERS_PER_PARTITION_MAX
        {
            self.drop_least_recent();
        }
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry::new(batch.epoch, batch.max_timestamp));
        if batch.epoch != entry.epoch {
            entry.epoch = batch.epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = entry.last_timestamp.max(batch.max_timestamp);
        match batch.kind {
            BatchKind::Marker(marker) => {
                entry.coordinator_epoch = entry.coordinator_epoch.max(marker.coordinator_epoch);
                let Some(first_offset) = entry.txn_first_offset.take() else {
                    return; // nothing open here: the marker changes nothing else
                };
                self.ongoing.remove(&first_offset);
                self.unreplicated.insert(first_offset, base_offset);
                if !marker.commit {
                    let open_first = self.ongoing.keys().next().copied();
                    let lso = open_first.map_or(base_offset + 1, |open| open.min(base_offset + 1));
                    self.aborted.push(AbortedTxn {
                        producer_id: batch.producer_id,
                        first_offset,
                        last_offset: base_offset,
                        last_stable_offset: lso,
                    });
                }
                return;
            }
            BatchKind::Data { transactional: true } if entry.txn_first_offset.is_none() => {
                entry.txn_first_offset = Some(base_offset);
                self.ongoing.insert(base_offset, batch.producer_id);
            }
            BatchKind::Data { .. } => {}
        }
        if batch.first_sequence < 0 {
            return; // no sequence to remember (written by the broker for the producer)
        }
        if entry.batches.len() == BATCHES_PER_PRODUCER_MAX {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMetadata {
            first_sequence: batch.first_sequence,
            last_sequence: batch.last_sequence,
            base_offset,
            last_offset,
        });
    }

    fn drop_least_recent(&mut self) {
        let oldest = self
            .producers
            .iter()
            .filter(|(_, entry)| entry.txn_first_offset.is_none())
            .min_by_key(|(_, entry)| entry.last_timestamp)
            .map(|(id, _)| *id);
        if let Some(id) = oldest {
            self.producers.remove(&id);
        }
    }

    /// Drops producers whose last batch is below `log_start_offset` or whose last timestamp is
    /// older than `now_ms - expiration_ms`. Returns how many it dropped.
    /// A producer with an open transaction is kept. Aborted transactions wholly below the log
    /// start are forgotten too.
    pub fn expire(&mut self, log_start_offset: i64, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            let last_offset = entry.batches.back().map_or(-1, |b| b.last_offset);
            entry.txn_first_offset.is_some()
                || (last_offset >= log_start_offset
                    && now_ms.saturating_sub(entry.last_timestamp) < expiration_ms)
        });
        self.aborted.retain(|txn| txn.last_offset >= log_start_offset);
        before - self.producers.len()
    }

    /// The first offset not yet stable: of the oldest open transaction, or of a closed one
    /// whose marker is not below `high_watermark` yet (those below it are forgotten here).
    pub fn first_unstable_offset(&mut self, high_watermark: i64) -> Option<i64> {
        self.unreplicated.retain(|_, marker| *marker >= high_watermark);
        let open = self.ongoing.keys().next().copied();
        let closing = self.unreplicated.keys().next().copied();
        match (open, closing) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Open transactions on this partition.
    pub fn open_transactions(&self) -> usize {
        self.ongoing.len()
    }

    /// (producer id, first offset) of the aborted transactions a read_committed reader of
    /// `from..upper` must know: those with `last_offset >= from` and `first_offset < upper`.
    pub fn aborted_between(&self, from: i64, upper: i64) -> Vec<(i64, i64)> {
        let start = self.aborted.partition_point(|txn| txn.last_offset < from);
        let mut out = Vec::new();
        for txn in &self.aborted[start..] {
            if txn.first_offset < upper {
                out.push((txn.producer_id, txn.first_offset));
            }
            if txn.last_stable_offset >= upper {
                break; // every later one starts at or above this LSO
            }
        }
        out
    }

    /// The aborted transactions this partition remembers.
    pub fn aborted(&self) -> &[AbortedTxn] {
        &self.aborted
    }

    /// The snapshot of this state as of `offset` (every batch below it applied).
    pub fn encode(&self, offset: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.producers.len() * 64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        let mut entries: Vec<(&i64, &ProducerEntry)> = self.producers.iter().collect();
        entries.sort_unstable_by_key(|(id, _)| **id);
        for (id, entry) in entries {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&entry.epoch.to_be_bytes());
            out.extend_from_slice(&entry.last_timestamp.to_be_bytes());
            out.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
            out.extend_from_slice(&entry.txn_first_offset.unwrap_or(-1).to_be_bytes());
            out.push(entry.batches.len() as u8);
            for batch in &entry.batches {
                out.extend_from_slice(&batch.first_sequence.to_be_bytes());
                out.extend_from_slice(&batch.last_sequence.to_be_bytes());
                out.extend_from_slice(&batch.base_offset.to_be_bytes());
                out.extend_from_slice(&batch.last_offset.to_be_bytes());
            }
        }
        out.extend_from_slice(&(self.aborted.len() as u32).to_be_bytes());
        for txn in &self.aborted {
            for field in
                [txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset]
            {
                out.extend_from_slice(&field.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// (offset, state) of a snapshot, or `None` when it is damaged or not a snapshot.
    pub fn decode(bytes: &[u8]) -> Option<(i64, Self)> {
        let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let mut reader = Reader { rest: body };
        let v2 = match reader.take(4)? {
            magic if magic == MAGIC => true,
            magic if magic == MAGIC_V1 => false,
            _ => return None,
        };
        let offset = i64::from_be_bytes(reader.array()?);
        let count = u32::from_be_bytes(reader.array()?) as usize;
        let mut producers = HashMap::with_capacity(count.min(PRODUCERS_PER_PARTITION_MAX));
        for _ in 0..count {
            let id = i64::from_be_bytes(reader.array()?);
            let epoch = i16::from_be_bytes(reader.array()?);
            let last_timestamp = i64::from_be_bytes(reader.array()?);
            let mut entry = ProducerEntry::new(epoch, last_timestamp);
            if v2 {
                entry.coordinator_epoch = i32::from_be_bytes(reader.array()?);
                let first = i64::from_be_bytes(reader.array()?);
                entry.txn_first_offset = (first >= 0).then_some(first);
            }
            let batch_count = usize::from(*reader.take(1)?.first()?);
            if batch_count > BATCHES_PER_PRODUCER_MAX {
                return None;
            }
            let mut batches = VecDeque::with_capacity(batch_count);
            for _ in 0..batch_count {
                batches.push_back(BatchMetadata {
                    first_sequence: i32::from_be_bytes(reader.array()?),
                    last_sequence: i32::from_be_bytes(reader.array()?),
                    base_offset: i64::from_be_bytes(reader.array()?),
                    last_offset: i64::from_be_bytes(reader.array()?),
                });
            }
            entry.batches = batches;
            producers.insert(id, entry);
        }
        let mut aborted = Vec::new();
        if v2 {
            let count = u32::from_be_bytes(reader.array()?) as usize;
            if count > ABORTED_TXNS_MAX {
                return None;
            }
            aborted.reserve(count.min(reader.rest.len() / 32));
            for _ in 0..count {
                aborted.push(AbortedTxn {
                    producer_id: i64::from_be_bytes(reader.array()?),
                    first_offset: i64::from_be_bytes(reader.array()?),
                    last_offset: i64::from_be_bytes(reader.array()?),
                    last_stable_offset: i64::from_be_bytes(reader.array()?),
                });
            }
        }
        let ongoing = producers
            .iter()
            .filter_map(|(id, entry)| entry.txn_first_offset.map(|first| (first, *id)))
            .collect();
        let states = ProducerStates { producers, ongoing, unreplicated: BTreeMap::new(), aborted };
        reader.rest.is_empty().then_some((offset, states))
    }
}

/// `<offset, 20 digits>.snapshot`.
pub fn snapshot_file_name(offset: i64) -> String {
    format!("{offset:020}.{SNAPSHOT_SUFFIX}")
}

/// The offset a snapshot file name stands for.
pub fn parse_snapshot_file_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(SNAPSHOT_SUFFIX)?.strip_suffix('.')?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(count)?;
        self.rest = tail;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(producer_id: i64, epoch: i16, first: i32, count: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id,
            epoch,
            first_sequence: first,
            last_sequence: add_sequence(first, count - 1),
            max_timestamp: 1_000,
            kind: BatchKind::Data { transactional: false },
        }
    }

    fn txn_batch(producer_id: i64, epoch: i16, first: i32, count: i32) -> ProducerBatch {
        ProducerBatch {
            kind: BatchKind::Data { transactional: true },
            ..batch(producer_id, epoch, first, count)
        }
    }

    fn marker(producer_id: i64, epoch: i16, commit: bool, coordinator_epoch: i32) -> ProducerBatch {
        let marker = wire::txn_marker::EndTxnMarker { commit, coordinator_epoch };
        ProducerBatch {
            first_sequence: -1,
            last_sequence: -1,
            kind: BatchKind::Marker(marker),
            ..batch(producer_id, epoch, 0, 1)
        }
    }

    fn kafka_code(error: StorageError) -> &'static str {
        match error {
            StorageError::OutOfOrderSequence { .. } => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            StorageError::InvalidProducerEpoch { .. } => "INVALID_PRODUCER_EPOCH",
            StorageError::InvalidTxnState { .. } => "INVALID_TXN_STATE",
            StorageError::TransactionCoordinatorFenced { .. } => "TRANSACTION_COORDINATOR_FENCED",
            other => panic!("unexpected {other}"),
        }
    }

    /// Appends `b` at the next offsets if the check allows it.
    fn append(states: &mut ProducerStates, next_offset: &mut i64, b: ProducerBatch) -> Verdict {
        let verdict = states.check(&b).expect("allowed");
        if verdict == Verdict::Append {
            let count = i64::from(b.last_sequence - b.first_sequence) + 1;
            states.record(&b, *next_offset, *next_offset + count - 1);
            *next_offset += count;
        }
        verdict
    }

    #[test]
    fn in_sequence_batches_append_and_retries_return_the_original_offsets() {
        let mut states = ProducerStates::default();
        let mut next = 100;
        assert_eq!(append(&mut states, &mut next, batch(7, 0, 0, 3)), Verdict::Append);
        assert_eq!(append(&mut states, &mut next, batch(7, 0, 3, 2)), Verdict::Append);
        assert_eq!(next, 105);
        let original = BatchMetadata {
            first_sequence: 0,
            last_sequence: 2,
            base_offset: 100,
            last_offset: 102,
        };
        assert_eq!(states.check(&batch(7, 0, 0, 3)).ok(), Some(Verdict::Duplicate(original)));
        // Every one of the last five batches is recognised; the sixth oldest no longer is.
        for first in (5..30).step_by(5) {
            append(&mut states, &mut next, batch(7, 0, first, 5));
        }
        assert!(matches!(states.check(&batch(7, 0, 10, 5)), Ok(Verdict::Duplicate(_))));
        assert_eq!(
            states.check(&batch(7, 0, 0, 3)).map_err(kafka_code),
            Err("OUT_OF_ORDER_SEQUENCE_NUMBER")
        );
    }

    #[test]
    fn each_error_case_gets_kafkas_code() {
        let mut states = ProducerStates::default();
        let mut next = 0;
        append(&mut states, &mut next, batch(1, 3, 0, 4));
        // A gap.
        assert_eq!(
            states.check(&batch(1, 3, 5, 1)).map_err(kafka_code),
            Err("OUT_OF_ORDER_SEQUENCE_NUMBER")
        );
        // An overlap that is not a retry of a whole batch.
        assert_eq!(
            states.check(&batch(1, 3, 2, 2)).map_err(kafka_code),
            Err("OUT_OF_ORDER_SEQUENCE_NUMBER")
        );
        // An older epoch (a zombie producer).
        assert_eq!(
            states.check(&batch(1, 2, 4, 1)).map_err(kafka_code),
            Err("INVALID_PRODUCER_EPOCH")
        );
        // A newer epoch must start over at 0.
        assert_eq!(
            states.check(&batch(1, 4, 4, 1)).map_err(kafka_code),
            Err("OUT_OF_ORDER_SEQUENCE_NUMBER")
        );
        assert_eq!(append(&mut states, &mut next, batch(1, 4, 0, 1)), Verdict::Append);
        assert_eq!(states.get(1).map(|e| e.epoch), Some(4));
        // An unknown producer may start anywhere (Kafka 2.5+: its state may have been removed
        // by retention or DeleteRecords while it went on).
        assert_eq!(states.check(&batch(2, 0, 17, 1)).ok(), Some(Verdict::Append));
        assert_eq!(states.check(&batch(2, 0, 0, 1)).ok(), Some(Verdict::Append));
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        assert_eq!(add_sequence(i32::MAX, 1), 0);
        assert_eq!(add_sequence(i32::MAX - 1, 3), 1);
        let mut states = ProducerStates::default();
        let mut next = 0;
        append(&mut states, &mut next, batch(9, 0, 0, 1));
        states.record(&batch(9, 0, i32::MAX - 1, 2), 1, 2);
        assert_eq!(states.check(&batch(9, 0, 0, 5)).ok(), Some(Verdict::Append));
    }

    #[test]
    fn expiry_drops_producers_below_the_log_start_or_idle_too_long() {
        let mut states = ProducerStates::default();
        states.record(&batch(1, 0, 0, 1), 10, 10);
        states.record(&batch(2, 0, 0, 1), 20, 20);
        assert_eq!(states.expire(15, 2_000, 10_000), 1);
        assert!(states.get(1).is_none() && states.get(2).is_some());
        assert_eq!(states.expire(0, 1_000 + 10_000, 10_000), 1);
        assert!(states.is_empty());
    }

    #[test]
    fn snapshots_round_trip_and_damage_is_detected() {
        let mut states = ProducerStates::default();
        let mut next = 0;
        for id in 0..4 {
            for first in 0..7 {
                append(&mut states, &mut next, batch(id, 2, first, 1));
            }
        }
        let bytes = states.encode(next);
        assert_eq!(ProducerStates::decode(&bytes), Some((next, states.clone())));
        for position in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[position] ^= 0x40;
            assert_eq!(ProducerStates::decode(&damaged), None, "flip at {position}");
            assert_eq!(ProducerStates::decode(&bytes[..position]), None, "cut at {position}");
        }
        assert_eq!(snapshot_file_name(42), "00000000000000000042.snapshot");
        assert_eq!(parse_snapshot_file_name("00000000000000000042.snapshot"), Some(42));
        assert_eq!(parse_snapshot_file_name("00000000000000000042.log"), None);
    }

    #[test]
    fn transactions_open_close_and_hold_back_the_last_stable_offset() {
        let mut states = ProducerStates::default();
        let mut next = 0;
        append(&mut states, &mut next, batch(1, 0, 0, 2)); // 0..=1, plain
        assert_eq!(states.first_unstable_offset(next), None);
        append(&mut states, &mut next, txn_batch(2, 0, 0, 3)); // 2..=4 opens producer 2's
        append(&mut states, &mut next, txn_batch(3, 0, 0, 1)); // 5 opens producer 3's
        append(&mut states, &mut next, txn_batch(2, 0, 3, 1)); // 6 stays in it
        assert_eq!(states.first_unstable_offset(next), Some(2));
        assert_eq!(states.open_transactions(), 2);
        // A plain batch from a producer whose transaction is open.
        assert_eq!(states.check(&batch(2, 0, 4, 1)).map_err(kafka_code), Err("INVALID_TXN_STATE"));
        // Producer 2 aborts at 7; producer 3's still holds the LSO at 5.
        assert_eq!(append(&mut states, &mut next, marker(2, 0, false, 0)), Verdict::Append);
        assert_eq!(states.first_unstable_offset(next), Some(5));
        assert_eq!(
            states.aborted(),
            &[AbortedTxn {
                producer_id: 2,
                first_offset: 2,
                last_offset: 7,
                last_stable_offset: 5
            }]
        );
        // Producer 3 commits at 8: no aborted entry; stable once the HW passes the marker.
        append(&mut states, &mut next, marker(3, 0, true, 0));
        assert_eq!(states.first_unstable_offset(8), Some(5));
        assert_eq!(states.first_unstable_offset(9), None);
        assert_eq!(states.aborted().len(), 1);
        assert_eq!(states.aborted_between(0, 9), vec![(2, 2)]);
        assert_eq!(states.aborted_between(8, 9), Vec::<(i64, i64)>::new());
        assert_eq!(states.aborted_between(0, 2), Vec::<(i64, i64)>::new());
        // The next batch of producer 2 may be plain again.
        assert_eq!(states.check(&batch(2, 0, 4, 1)).ok(), Some(Verdict::Append));
    }

    #[test]
    fn markers_fence_older_epochs_and_older_coordinators() {
        let mut states = ProducerStates::default();
        let mut next = 0;
        append(&mut states, &mut next, txn_batch(1, 4, 0, 2));
        // The coordinator fenced the producer: its abort marker carries epoch 5.
        append(&mut states, &mut next, marker(1, 5, false, 3));
        assert_eq!(states.get(1).map(|e| (e.epoch, e.coordinator_epoch)), Some((5, 3)));
        assert_eq!(
            states.check(&txn_batch(1, 4, 2, 1)).map_err(kafka_code),
            Err("INVALID_PRODUCER_EPOCH")
        );
        assert_eq!(
            states.check(&marker(1, 5, true, 2)).map_err(kafka_code),
            Err("TRANSACTION_COORDINATOR_FENCED")
        );
        assert_eq!(
            states.check(&marker(1, 4, true, 3)).map_err(kafka_code),
            Err("INVALID_PRODUCER_EPOCH")
        );
        // A marker for a producer with nothing open is written and changes nothing else.
        append(&mut states, &mut next, marker(9, 0, false, 3));
        assert_eq!(states.aborted().len(), 1);
        // The producer's next epoch starts over at sequence 0.
        assert_eq!(states.check(&txn_batch(1, 6, 0, 1)).ok(), Some(Verdict::Append));
    }

    #[test]
    fn open_transactions_survive_expiry_and_snapshots() {
        let mut states = ProducerStates::default();
        let mut next = 0;
        append(&mut states, &mut next, txn_batch(1, 0, 0, 1));
        append(&mut states, &mut next, txn_batch(2, 0, 0, 1));
        append(&mut states, &mut next, marker(2, 0, false, 1));
        append(&mut states, &mut next, batch(3, 0, 0, 1));
        // Everything is old and below the log start, but producer 1 has an open transaction.
        assert_eq!(states.expire(next, i64::MAX, 1), 2);
        assert!(states.get(1).is_some());
        assert_eq!(states.first_unstable_offset(next), Some(0));
        assert!(states.aborted().is_empty(), "aborted below the log start are forgotten");
        let mut states = ProducerStates::default();
        let mut next = 0;
        append(&mut states, &mut next, txn_batch(1, 0, 0, 1));
        append(&mut states, &mut next, txn_batch(2, 0, 0, 2));
        append(&mut states, &mut next, marker(2, 0, false, 1));
        let bytes = states.encode(next);
        let (offset, mut decoded) = ProducerStates::decode(&bytes).expect("decodes");
        assert_eq!(offset, next);
        assert_eq!(decoded.first_unstable_offset(next), Some(0));
        assert_eq!(decoded.aborted(), states.aborted());
        assert_eq!(decoded.get(2).map(|e| e.coordinator_epoch), Some(1));
    }

    #[test]
    fn sps1_snapshots_still_load() {
        let mut v1 = Vec::new();
        v1.extend_from_slice(b"SPS1");
        v1.extend_from_slice(&10i64.to_be_bytes());
        v1.extend_from_slice(&1u32.to_be_bytes());
        v1.extend_from_slice(&7i64.to_be_bytes());
        v1.extend_from_slice(&2i16.to_be_bytes());
        v1.extend_from_slice(&1_000i64.to_be_bytes());
        v1.push(1);
        for field in [0i32, 4] {
            v1.extend_from_slice(&field.to_be_bytes());
        }
        for field in [5i64, 9] {
            v1.extend_from_slice(&field.to_be_bytes());
        }
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        let (offset, states) = ProducerStates::decode(&v1).expect("SPS1 reads");
        assert_eq!(offset, 10);
        let entry = states.get(7).expect("producer 7");
        assert_eq!((entry.epoch, entry.coordinator_epoch, entry.txn_first_offset), (2, -1, None));
        assert_eq!(entry.batches.back().map(|b| b.last_offset), Some(9));
    }
}
