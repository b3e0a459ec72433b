//! The produce-time check of one record batch, as Kafka's `LogValidator` makes it, before the
//! broker stores a client's batch. The CRC only proves the bytes are what the client sent; this
//! proves they mean one record per offset: the header's record count and offset range agree,
//! every record's offset delta is its index, every record's fields fill exactly its length
//! inside the batch (varints included), no bytes follow the last record, and timestamps are
//! inside the topic's `message.timestamp.before.max.ms` / `after.max.ms` of the broker's clock
//! (under `CreateTime`). It also returns what the broker needs from the records: the true max
//! timestamp (the broker rewrites a header that disagrees, as Kafka does) and whether any key is
//! null (refused on compacted topics).
//!
//! Compressed batches are checked by streaming decompression (`record_stream`), holding one key,
//! never the inflated records, and inflating at most the caller's budget: a pass with a small
//! budget answers `Fault::OverBudget` for a batch that inflates further, so the caller can run
//! the full check off its latency path (the broker does: see `services::partitions::append`).
//!
//! Errors follow Kafka's mapping: `Fault::Corrupt` (CORRUPT_MESSAGE) for bytes that do not
//! decode (record lengths that overrun, overflowing varints, undecodable compressed bytes,
//! records inflating past `compression::DECOMPRESSED_BYTES_MAX`),
//! `Fault::Invalid` (INVALID_RECORD) for decodable but inconsistent batches, `Fault::Timestamp`
//! (INVALID_TIMESTAMP) for out-of-range timestamps.
//! References: Kafka `LogValidator.validateBatch`/`validateRecord`, `DefaultRecord.readFrom`.

use crate::record_batch::{Compression, RecordBatchHeader, RecordIter, BATCH_HEADER_BYTES};
use crate::record_stream::{stream_records, StreamedRecord};
use crate::DecodeError;

/// What a batch's timestamps are checked against (`CreateTime` topics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampRule {
    /// The broker's clock, ms since the epoch.
    pub now_ms: i64,
    /// `message.timestamp.before.max.ms`: how far in the past a record may be.
    pub before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a record may be.
    pub after_max_ms: i64,
}

impl TimestampRule {
    /// Kafka's defaults: any timestamp.
    pub const ANY: TimestampRule =
        TimestampRule { now_ms: 0, before_max_ms: i64::MAX, after_max_ms: i64::MAX };

    /// Whether a record timestamp is within the bounds (-1, Kafka's "no timestamp" from old
    /// clients, is not checked).
    pub fn allows(&self, timestamp: i64) -> bool {
        if timestamp == -1 {
            return true;
        }
        let before = self.now_ms.saturating_sub(timestamp);
        let after = timestamp.saturating_sub(self.now_ms);
        before <= self.before_max_ms && after <= self.after_max_ms
    }

    fn check(&self, index: usize, timestamp: i64) -> Result<(), Fault> {
        if !self.allows(timestamp) {
            return Err(Fault::Timestamp { index, timestamp, now_ms: self.now_ms });
        }
        Ok(())
    }
}

/// Why a batch is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// The records do not decode: CORRUPT_MESSAGE.
    #[error("corrupt batch: {0}")]
    Corrupt(DecodeError),
    /// The records decode but contradict the header or each other: INVALID_RECORD.
    #[error("invalid batch: {0}")]
    Invalid(String),
    /// A record's timestamp is outside the topic's bounds: INVALID_TIMESTAMP.
    #[error("record {index} has timestamp {timestamp}, outside the topic's bounds at {now_ms}")]
    Timestamp { index: usize, timestamp: i64, now_ms: i64 },
    /// The records inflate past this pass's budget: not a verdict; check again with more.
    #[error("records inflate past {budget} bytes")]
    OverBudget { budget: usize },
}

impl From<DecodeError> for Fault {
    fn from(error: DecodeError) -> Self {
        match error {
            DecodeError::OverBudget { budget } => Fault::OverBudget { budget },
            // Including "records decompress past the size limit": a bomb is corrupt input.
            other => Fault::Corrupt(other),
        }
    }
}

/// What the check learnt from the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    pub records: u32,
    /// The largest record timestamp (the header's `maxTimestamp` should say the same).
    pub max_timestamp: i64,
    /// Some record has a null key.
    pub keyless: bool,
}

/// Checks a batch's header fields that need no records.
fn check_header(header: &RecordBatchHeader<'_>) -> Result<u32, Fault> {
    let count = header.record_count();
    let from_offsets = i64::from(header.last_offset_delta()) + 1;
    if count <= 0 {
        return Err(Fault::Invalid(format!("record count {count} (a batch holds at least one)")));
    }
    if i64::from(count) != from_offsets {
        return Err(Fault::Invalid(format!(
            "record count {count} disagrees with the offset range of {from_offsets} \
             (lastOffsetDelta {})",
            header.last_offset_delta()
        )));
    }
    if header.producer_id() >= 0 && header.base_sequence() < 0 {
        return Err(Fault::Invalid(format!(
            "producer id {} with base sequence {}",
            header.producer_id(),
            header.base_sequence()
        )));
    }
    Ok(count as u32)
}

/// Folds one record into the running result.
struct Walk {
    rule: TimestampRule,
    base_timestamp: i64,
    index: usize,
    checked: Checked,
}

impl Walk {
    fn record(
        &mut self,
        offset_delta: i32,
        timestamp_delta: i64,
        keyless: bool,
    ) -> Result<(), Fault> {
        if i64::from(offset_delta) != self.index as i64 {
            return Err(Fault::Invalid(format!(
                "record {} has offset delta {offset_delta} (deltas count up from 0)",
                self.index
            )));
        }
        let timestamp = self.base_timestamp.saturating_add(timestamp_delta);
        self.rule.check(self.index, timestamp)?;
        self.checked.max_timestamp = self.checked.max_timestamp.max(timestamp);
        self.checked.keyless |= keyless;
        self.index += 1;
        Ok(())
    }
}

/// Checks one batch (its framing and CRC already checked by `RecordBatchHeader::parse` and
/// `verify_crc`), inflating at most `inflate_budget` bytes of a compressed one.
pub fn check_batch(
    header: &RecordBatchHeader<'_>,
    rule: TimestampRule,
    inflate_budget: usize,
) -> Result<Checked, Fault> {
    let records = check_header(header)?;
    let mut walk = Walk {
        rule,
        base_timestamp: header.base_timestamp(),
        index: 0,
        checked: Checked { records, max_timestamp: -1, keyless: false },
    };
    if header.compression() == Compression::None {
        // The fast path: records decoded in place from the batch.
        let section = header.as_bytes().get(BATCH_HEADER_BYTES..).unwrap_or_default();
        let mut iter = RecordIter::over(section, header.record_count());
        let mut used = 0usize;
        while let Some(record) = iter.next_with_raw() {
            let (view, raw) = record.map_err(Fault::Corrupt)?;
            used += raw.len();
            walk.record(view.offset_delta, view.timestamp_delta, view.key.is_none())?;
        }
        if used != section.len() {
            return Err(Fault::Invalid(format!(
                "{} bytes follow the last record",
                section.len().saturating_sub(used)
            )));
        }
    } else {
        let mut fault = None;
        let streamed = stream_records(header, inflate_budget, |record: StreamedRecord<'_>| {
            walk.record(record.offset_delta, record.timestamp_delta, record.key.is_none()).map_err(
                |error| {
                    fault = Some(error);
                    DecodeError::BadRecord("refused")
                },
            )
        });
        if let Some(fault) = fault {
            return Err(fault);
        }
        streamed?;
    }
    if walk.index as u32 != records {
        return Err(Fault::Invalid(format!("{} records for a count of {records}", walk.index)));
    }
    Ok(walk.checked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BatchRecord, RecordBatchBuilder};

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn batch(codec: Compression, keys: &[Option<&[u8]>]) -> Vec<u8> {
        let mut builder = RecordBatchBuilder::new(1_700_000_000_000);
        for (i, key) in keys.iter().enumerate() {
            builder.push(BatchRecord {
                key: *key,
                value: Some(b"value"),
                timestamp_delta: i as i64,
            });
        }
        builder.build_compressed(codec).unwrap()
    }

    fn check(bytes: &[u8]) -> Result<Checked, Fault> {
        let header = RecordBatchHeader::parse(bytes, 1 << 26).unwrap();
        check_batch(&header, TimestampRule::ANY, usize::MAX)
    }

    /// Sets a header field and rewrites the CRC, as an attacker with a CRC library would.
    fn patch(bytes: &mut [u8], at: usize, value: &[u8]) {
        bytes[at..at + value.len()].copy_from_slice(value);
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn well_formed_batches_pass_for_every_codec() {
        for codec in CODECS {
            let bytes = batch(codec, &[Some(b"a"), None, Some(b"c")]);
            let checked = check(&bytes).unwrap();
            assert_eq!(
                checked,
                Checked { records: 3, max_timestamp: 1_700_000_000_002, keyless: true },
                "{codec:?}"
            );
        }
    }

    #[test]
    fn a_count_or_offset_range_that_disagrees_with_the_records_is_invalid() {
        for codec in CODECS {
            let good = batch(codec, &[Some(b"a"), Some(b"b")]);
            // lastOffsetDelta 0 for two records (two records at one offset).
            let mut bytes = good.clone();
            patch(&mut bytes, 23, &0i32.to_be_bytes());
            assert!(matches!(check(&bytes), Err(Fault::Invalid(_))), "{codec:?}");
            // lastOffsetDelta 2^31-1 (moves the log end by 2.1 billion).
            let mut bytes = good.clone();
            patch(&mut bytes, 23, &i32::MAX.to_be_bytes());
            assert!(matches!(check(&bytes), Err(Fault::Invalid(_))), "{codec:?}");
            // Record counts -1 and 5 for two records, with a matching offset range.
            for count in [-1i32, 5] {
                let mut bytes = good.clone();
                patch(&mut bytes, 57, &count.to_be_bytes());
                if count > 0 {
                    patch(&mut bytes, 23, &(count - 1).to_be_bytes());
                }
                assert!(check(&bytes).is_err(), "{codec:?} count {count}");
            }
            // Count 1 for two records: bytes follow the last record.
            let mut bytes = good.clone();
            patch(&mut bytes, 57, &1i32.to_be_bytes());
            patch(&mut bytes, 23, &0i32.to_be_bytes());
            assert!(check(&bytes).is_err(), "{codec:?} trailing record");
        }
    }

    #[test]
    fn offset_deltas_must_count_up_from_zero() {
        let mut bytes = batch(Compression::None, &[Some(b"a"), Some(b"b")]);
        // The first record: length varint (1 byte), attributes, timestamp delta 0 (1 byte),
        // then its offset delta 0 (1 byte) at 61 + 3.
        assert_eq!(bytes[64], 0);
        bytes[64] = 4; // zig-zag 2
        patch(&mut bytes, 0, &0i64.to_be_bytes());
        assert!(matches!(check(&bytes), Err(Fault::Invalid(why)) if why.contains("offset delta")));
    }

    #[test]
    fn record_lengths_that_overrun_and_overflowing_varints_are_corrupt() {
        let good = batch(Compression::None, &[Some(b"a"), Some(b"b")]);
        let mut overrun = good.clone();
        overrun[61] = 0x7e; // the first record's length: 63 bytes, past the batch's end
        patch(&mut overrun, 0, &0i64.to_be_bytes());
        assert!(matches!(check(&overrun), Err(Fault::Corrupt(_))));
        let mut varint = good.clone();
        varint.truncate(61);
        varint.extend_from_slice(&[0xff; 12]);
        let length = (varint.len() - 12) as i32;
        varint[8..12].copy_from_slice(&length.to_be_bytes());
        patch(&mut varint, 0, &0i64.to_be_bytes());
        assert!(matches!(check(&varint), Err(Fault::Corrupt(DecodeError::VarintTooLong))));
    }

    #[test]
    fn compressed_garbage_is_corrupt_and_a_bomb_is_refused_within_the_budget() {
        let good = batch(Compression::None, &[Some(b"a")]);
        for codec in [2i16, 1, 3, 4] {
            let mut bytes = good[..61].to_vec();
            bytes.extend((0..200u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
            let length = (bytes.len() - 12) as i32;
            bytes[8..12].copy_from_slice(&length.to_be_bytes());
            patch(&mut bytes, 21, &codec.to_be_bytes());
            assert!(matches!(check(&bytes), Err(Fault::Corrupt(_))), "codec {codec}");
        }
        // One record whose value is 8 MiB of zeros: 300 bytes of zstd.
        let value_bytes = 8usize << 20;
        let mut body = vec![0u8, 0, 0];
        crate::varint::put_varint(&mut body, 1);
        body.push(b'k');
        crate::varint::put_varint(&mut body, value_bytes as i32);
        let mut plain = Vec::new();
        crate::varint::put_varint(&mut plain, (body.len() + value_bytes + 1) as i32);
        plain.extend_from_slice(&body);
        plain.resize(plain.len() + value_bytes, 0);
        plain.push(0);
        let mut bomb = good[..61].to_vec();
        bomb.extend(zstd::stream::encode_all(&plain[..], 3).unwrap());
        let length = (bomb.len() - 12) as i32;
        bomb[8..12].copy_from_slice(&length.to_be_bytes());
        patch(&mut bomb, 21, &4i16.to_be_bytes());
        let header = RecordBatchHeader::parse(&bomb, 1 << 26).unwrap();
        assert_eq!(
            check_batch(&header, TimestampRule::ANY, 1 << 20),
            Err(Fault::OverBudget { budget: 1 << 20 })
        );
        // Under the full bound it is a valid (large) record.
        assert_eq!(check(&bomb).map(|checked| checked.records), Ok(1));
    }

    #[test]
    fn timestamps_outside_the_topic_bounds_are_refused() {
        let bytes = batch(Compression::Lz4, &[Some(b"a"), Some(b"b")]);
        let header = RecordBatchHeader::parse(&bytes, 1 << 26).unwrap();
        let now = 1_700_000_000_000;
        let rule = TimestampRule { now_ms: now, before_max_ms: 1000, after_max_ms: 0 };
        assert!(check_batch(&header, rule, usize::MAX).is_err());
        let rule = TimestampRule { now_ms: now + 500, before_max_ms: 1000, after_max_ms: 0 };
        assert!(check_batch(&header, rule, usize::MAX).is_ok());
        let rule = TimestampRule { now_ms: now + 5000, before_max_ms: 1000, after_max_ms: 0 };
        assert!(matches!(
            check_batch(&header, rule, usize::MAX),
            Err(Fault::Timestamp { index: 0, .. })
        ));
    }
}
