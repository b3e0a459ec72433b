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
//! - unknown producer: sequence 0 starts it; any other sequence is UNKNOWN_PRODUCER_ID (its
//!   state was removed by retention or expiry, as Kafka answers before KIP-360's bump).
//!
//! Persistence: the state is derived from the log. `PartitionLog` writes a snapshot
//! (`<offset>.snapshot`: the state of every batch below `offset`) at each segment roll and at
//! clean shutdown; opening a log loads the newest readable snapshot at or below the log end and
//! replays only the batches after it. Producers whose last batch fell below the log start
//! (retention, DeleteRecords) or whose last timestamp is older than
//! `producer.id.expiration.ms` are dropped.
//!
//! Snapshot format (big-endian): magic `SPS1`, offset i64, producer count u32, then per
//! producer: id i64, epoch i16, last timestamp i64, batch count u8, batches (first sequence
//! i32, last sequence i32, base offset i64, last offset i64); then CRC32C of all before it.

use crate::error::StorageError;
use std::collections::{HashMap, VecDeque};
use wire::RecordBatchHeader;

/// Batches remembered per producer (Kafka keeps 5: a producer has at most 5 in flight).
pub const BATCHES_PER_PRODUCER_MAX: usize = 5;
/// Kafka's `producer.id.expiration.ms` default (1 day).
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 86_400_000;
/// Producers tracked per partition before the least recently used is dropped.
pub const PRODUCERS_PER_PARTITION_MAX: usize = 100_000;
/// Snapshot file suffix.
pub const SNAPSHOT_SUFFIX: &str = "snapshot";

const MAGIC: &[u8; 4] = b"SPS1";

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
}

/// The idempotence fields of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub max_timestamp: i64,
}

impl ProducerBatch {
    /// `None` for a batch without a producer id (not idempotent).
    pub fn of(header: &RecordBatchHeader<'_>) -> Option<Self> {
        if header.producer_id() < 0 {
            return None;
        }
        let first_sequence = header.base_sequence();
        Some(ProducerBatch {
            producer_id: header.producer_id(),
            epoch: header.producer_epoch(),
            first_sequence,
            last_sequence: add_sequence(first_sequence, header.last_offset_delta()),
            max_timestamp: header.max_timestamp(),
        })
    }
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
    pub fn active(&self) -> Vec<(i64, i16, i32, i64)> {
        let mut out: Vec<(i64, i16, i32, i64)> = self
            .producers
            .iter()
            .map(|(id, entry)| {
                let last_sequence = entry.batches.back().map_or(-1, |b| b.last_sequence);
                (*id, entry.epoch, last_sequence, entry.last_timestamp)
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Checks a batch against the rules in the module header.
    pub fn check(&self, batch: &ProducerBatch) -> Result<Verdict, StorageError> {
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            return if batch.first_sequence == 0 {
                Ok(Verdict::Append)
            } else {
                Err(StorageError::UnknownProducerId {
                    producer_id: batch.producer_id,
                    sequence: batch.first_sequence,
                })
            };
        };
        if batch.epoch < entry.epoch {
            return Err(StorageError::InvalidProducerEpoch {
                producer_id: batch.producer_id,
                epoch: batch.epoch,
                current_epoch: entry.epoch,
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
        let entry = self.producers.entry(batch.producer_id).or_insert_with(|| ProducerEntry {
            epoch: batch.epoch,
            last_timestamp: batch.max_timestamp,
            batches: VecDeque::new(),
        });
        if batch.epoch != entry.epoch {
            entry.epoch = batch.epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = entry.last_timestamp.max(batch.max_timestamp);
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
        let oldest =
            self.producers.iter().min_by_key(|(_, entry)| entry.last_timestamp).map(|(id, _)| *id);
        if let Some(id) = oldest {
            self.producers.remove(&id);
        }
    }

    /// Drops producers whose last batch is below `log_start_offset` or whose last timestamp is
    /// older than `now_ms - expiration_ms`. Returns how many it dropped.
    pub fn expire(&mut self, log_start_offset: i64, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            let last_offset = entry.batches.back().map_or(-1, |b| b.last_offset);
            last_offset >= log_start_offset
                && now_ms.saturating_sub(entry.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
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
            out.push(entry.batches.len() as u8);
            for batch in &entry.batches {
                out.extend_from_slice(&batch.first_sequence.to_be_bytes());
                out.extend_from_slice(&batch.last_sequence.to_be_bytes());
                out.extend_from_slice(&batch.base_offset.to_be_bytes());
                out.extend_from_slice(&batch.last_offset.to_be_bytes());
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
        if reader.take(4)? != MAGIC {
            return None;
        }
        let offset = i64::from_be_bytes(reader.array()?);
        let count = u32::from_be_bytes(reader.array()?) as usize;
        let mut producers = HashMap::with_capacity(count.min(PRODUCERS_PER_PARTITION_MAX));
        for _ in 0..count {
            let id = i64::from_be_bytes(reader.array()?);
            let epoch = i16::from_be_bytes(reader.array()?);
            let last_timestamp = i64::from_be_bytes(reader.array()?);
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
            producers.insert(id, ProducerEntry { epoch, last_timestamp, batches });
        }
        reader.rest.is_empty().then_some((offset, ProducerStates { producers }))
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
        }
    }

    fn kafka_code(error: StorageError) -> &'static str {
        match error {
            StorageError::OutOfOrderSequence { .. } => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            StorageError::InvalidProducerEpoch { .. } => "INVALID_PRODUCER_EPOCH",
            StorageError::UnknownProducerId { .. } => "UNKNOWN_PRODUCER_ID",
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
        // An unknown producer that does not start at 0.
        assert_eq!(
            states.check(&batch(2, 0, 17, 1)).map_err(kafka_code),
            Err("UNKNOWN_PRODUCER_ID")
        );
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
}
