//! A produce batch checked once, in two steps, its header parsed once:
//! - `FramedBatch`: the produce handler splits a partition's records into batches and parses
//!   each header (length, magic, last offset delta), on the connection's shard;
//! - `CheckedBatch`: the partition service verifies its CRC32C (`FramedBatch::verify`), on the
//!   owner shard, so a request's CRC work is spread over the shards owning its partitions, as
//!   before the batch had a type.
//!
//! The log takes only `CheckedBatch`, reads its header through `header()` without parsing it
//! again, and patches it in place through `CheckedBatchMut` (the base offset and leader epoch,
//! outside the CRC; timestamps with the CRC rewritten).
//!
//! Invariants (what a holder may rely on, and the log asserts):
//! 1. the bytes are exactly one v2 batch: its length field matches them, its magic is 2, and
//!    its last offset delta is not negative (both types);
//! 2. a `CheckedBatch`'s CRC32C matched when it was checked, and every change since
//!    (`CheckedBatchMut`) kept it matching.

use crate::record_batch::{
    batch_size_from_prefix, DecodeError, RecordBatchHeader, RecordBatchMut, BATCH_HEADER_BYTES,
};
use bytes::{Bytes, BytesMut};

/// One batch whose framing was checked (its header parsed); its CRC not yet verified.
#[derive(Debug, Clone)]
pub struct FramedBatch {
    bytes: Bytes,
}

impl FramedBatch {
    /// Checks that `bytes` is exactly one batch (its header parsed, once).
    pub fn frame(bytes: Bytes, batch_bytes_max: usize) -> Result<Self, DecodeError> {
        let header = RecordBatchHeader::parse(&bytes, batch_bytes_max)?;
        if header.size_bytes() != bytes.len() {
            return Err(DecodeError::BadBatchLength {
                batch_length: bytes.len() as i64 - crate::LOG_OVERHEAD_BYTES as i64,
                batch_bytes_max,
            });
        }
        Ok(FramedBatch { bytes })
    }

    /// Splits a partition's records into their batches, each framed; at least one.
    /// The batches are slices of `records` (no copy).
    pub fn split(mut records: Bytes, batch_bytes_max: usize) -> Result<Vec<Self>, DecodeError> {
        if records.is_empty() {
            return Err(DecodeError::Truncated { needed: BATCH_HEADER_BYTES, available: 0 });
        }
        let mut batches = Vec::new();
        while !records.is_empty() {
            let size = batch_size_from_prefix(&records, batch_bytes_max)?;
            if size > records.len() {
                return Err(DecodeError::Truncated { needed: size, available: records.len() });
            }
            batches.push(Self::frame(records.split_to(size), batch_bytes_max)?);
        }
        Ok(batches)
    }

    /// The batch's header, read without parsing it again.
    pub fn header(&self) -> RecordBatchHeader<'_> {
        RecordBatchHeader::checked(&self.bytes)
    }

    /// Verifies its CRC32C (its header is not parsed again).
    pub fn verify(self) -> Result<CheckedBatch, DecodeError> {
        self.header().verify_crc()?;
        Ok(CheckedBatch { bytes: self.bytes })
    }
}

/// One batch, checked (framing and CRC32C).
#[derive(Debug, Clone)]
pub struct CheckedBatch {
    bytes: Bytes,
}

impl CheckedBatch {
    /// Checks that `bytes` is exactly one batch with a matching CRC32C.
    pub fn check(bytes: Bytes, batch_bytes_max: usize) -> Result<Self, DecodeError> {
        FramedBatch::frame(bytes, batch_bytes_max)?.verify()
    }

    /// The batch's header, read without parsing it again.
    pub fn header(&self) -> RecordBatchHeader<'_> {
        RecordBatchHeader::checked(&self.bytes)
    }

    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The batch in a buffer of its own, to patch: the same memory when nothing else holds a
    /// slice of it, else a copy.
    pub fn into_mut(self) -> CheckedBatchMut {
        let bytes = self.bytes.try_into_mut().unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        CheckedBatchMut { bytes }
    }
}

/// A checked batch being patched; its changes keep it checked.
#[derive(Debug)]
pub struct CheckedBatchMut {
    bytes: BytesMut,
}

impl CheckedBatchMut {
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    pub fn header(&self) -> RecordBatchHeader<'_> {
        RecordBatchHeader::checked(&self.bytes)
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Sets the base offset and the partition leader epoch (outside the CRC).
    pub fn stamp(&mut self, base_offset: i64, leader_epoch: i32) {
        let mut view = RecordBatchMut::checked(&mut self.bytes);
        view.set_base_offset(base_offset);
        view.set_partition_leader_epoch(leader_epoch);
    }

    /// LogAppendTime: the broker's time as every record's, and the CRC rewritten.
    pub fn set_log_append_time_and_crc(&mut self, now_ms: i64) {
        RecordBatchMut::checked(&mut self.bytes).set_log_append_time_and_crc(now_ms);
    }

    /// A corrected max timestamp, and the CRC rewritten.
    pub fn set_max_timestamp_and_crc(&mut self, max_timestamp: i64) {
        RecordBatchMut::checked(&mut self.bytes).set_max_timestamp_and_crc(max_timestamp);
    }

    pub fn freeze(self) -> CheckedBatch {
        CheckedBatch { bytes: self.bytes.freeze() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch_builder::{BatchRecord, RecordBatchBuilder};

    fn batch(value: &[u8]) -> Vec<u8> {
        let mut builder = RecordBatchBuilder::new(1_000);
        builder.push(BatchRecord { key: None, value: Some(value), timestamp_delta: 0 });
        builder.build()
    }

    #[test]
    fn records_split_into_checked_batches_and_bad_ones_are_refused() {
        let mut records = batch(b"one");
        records.extend_from_slice(&batch(b"two"));
        let batches = FramedBatch::split(Bytes::from(records.clone()), 1 << 20).unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].header().base_timestamp(), 1_000);
        assert!(batches.into_iter().all(|batch| batch.verify().is_ok()));
        assert!(FramedBatch::split(Bytes::new(), 1 << 20).is_err());
        let cut = Bytes::from(records[..records.len() - 1].to_vec());
        assert!(matches!(FramedBatch::split(cut, 1 << 20), Err(DecodeError::Truncated { .. })));
        let mut flipped = records.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let framed = FramedBatch::split(Bytes::from(flipped), 1 << 20).unwrap();
        let refused = framed.into_iter().last().unwrap().verify();
        assert!(matches!(refused, Err(DecodeError::CrcMismatch { .. })));
    }

    #[test]
    fn patches_keep_the_batch_checked() {
        let checked = CheckedBatch::check(Bytes::from(batch(b"v")), 1 << 20).unwrap();
        let mut patched = checked.into_mut();
        patched.stamp(42, 7);
        patched.set_max_timestamp_and_crc(5_000);
        let frozen = patched.freeze();
        let again = CheckedBatch::check(frozen.bytes().clone(), 1 << 20).unwrap();
        let header = again.header();
        assert_eq!((header.base_offset(), header.partition_leader_epoch()), (42, 7));
        assert_eq!(header.max_timestamp(), 5_000);
    }
}
