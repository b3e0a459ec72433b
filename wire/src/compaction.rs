//! Record-level rewrite of one batch for log compaction (`cleanup.policy=compact`).
//!
//! The rewritten batch keeps every header field that locates it or that readers rely on: base
//! offset, partition leader epoch, attributes (codec, timestamp type, transactional/control
//! bits), last offset delta, base and max timestamp, producer id/epoch/base sequence. Only its
//! records shrink; kept records are copied verbatim (their offset and timestamp deltas, key,
//! value and headers unchanged), recompressed with the batch's codec. So offsets keep their
//! meaning and batches stay contiguous: a batch whose every record is gone stays as an empty
//! batch (61 bytes) covering its offset range, as Kafka keeps empty batches for producer state.
//! References: Kafka `LogCleaner`, `MemoryRecords.filterTo` (KIP-98 retains the last offset
//! delta of a filtered batch).

use crate::compression::{compress, decompress};
use crate::record_batch::{RecordBatchHeader, RecordIter, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES};
use crate::{Compression, DecodeError};

/// One record as the compactor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    /// A null value: a tombstone.
    pub is_tombstone: bool,
}

/// Calls `visit` for every record of the batch (decompressing it if needed).
pub fn for_each_record(
    header: &RecordBatchHeader<'_>,
    mut visit: impl FnMut(RecordRef<'_>),
) -> Result<(), DecodeError> {
    with_records(header, |records| {
        let mut iter = RecordIter::over(records, header.record_count());
        while let Some(record) = iter.next_with_raw() {
            let (view, _) = record?;
            visit(RecordRef {
                offset: header.base_offset() + i64::from(view.offset_delta),
                key: view.key,
                is_tombstone: view.value.is_none(),
            });
        }
        Ok(())
    })
}

/// The batch with only the records `keep` accepts, or `None` when it keeps them all (nothing
/// to rewrite). The result has a fresh batch length, record count and CRC32C.
pub fn retain_records(
    header: &RecordBatchHeader<'_>,
    mut keep: impl FnMut(RecordRef<'_>) -> bool,
) -> Result<Option<Vec<u8>>, DecodeError> {
    let mut kept = Vec::new();
    let mut kept_count: i32 = 0;
    let mut dropped = false;
    with_records(header, |records| {
        let mut iter = RecordIter::over(records, header.record_count());
        while let Some(record) = iter.next_with_raw() {
            let (view, raw) = record?;
            let reference = RecordRef {
                offset: header.base_offset() + i64::from(view.offset_delta),
                key: view.key,
                is_tombstone: view.value.is_none(),
            };
            if keep(reference) {
                kept.extend_from_slice(raw);
                kept_count += 1;
            } else {
                dropped = true;
            }
        }
        Ok(())
    })?;
    if !dropped {
        return Ok(None);
    }
    let codec = header.compression();
    let body =
        if kept_count == 0 || codec == Compression::None { kept } else { compress(codec, &kept)? };
    let source = header.as_bytes();
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + body.len());
    // Everything up to the record count is the original header; then count and records.
    out.extend_from_slice(
        source.get(..BATCH_HEADER_BYTES - 4).ok_or(DecodeError::BadRecord("short header"))?,
    );
    out.extend_from_slice(&kept_count.to_be_bytes());
    out.extend_from_slice(&body);
    if kept_count == 0 {
        // An empty batch is written uncompressed, as Kafka writes its empty headers.
        let bits = header.attributes() & !0x07;
        if let Some(attributes) = out.get_mut(21..23) {
            attributes.copy_from_slice(&bits.to_be_bytes());
        }
    }
    let batch_length = i32::try_from(out.len() - LOG_OVERHEAD_BYTES)
        .map_err(|_| DecodeError::BadRecord("batch too large"))?;
    if let Some(field) = out.get_mut(8..12) {
        field.copy_from_slice(&batch_length.to_be_bytes());
    }
    let crc = crc32c::crc32c(out.get(21..).unwrap_or_default());
    if let Some(field) = out.get_mut(17..21) {
        field.copy_from_slice(&crc.to_be_bytes());
    }
    Ok(Some(out))
}

/// Runs `f` over the batch's records section, decompressed.
fn with_records<T>(
    header: &RecordBatchHeader<'_>,
    f: impl FnOnce(&[u8]) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let body = header.as_bytes().get(BATCH_HEADER_BYTES..).unwrap_or_default();
    match header.compression() {
        Compression::None => f(body),
        _ if header.record_count() == 0 => f(&[]),
        codec => f(&decompress(codec, body)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BatchRecord, RecordBatchBuilder};

    fn batch(codec: Compression) -> Vec<u8> {
        let mut builder = RecordBatchBuilder::new(1_700_000_000_000);
        builder.producer(5, 1, 100);
        for (i, key) in [b"a", b"b", b"a", b"c"].iter().enumerate() {
            let value = format!("value-{i}");
            builder.push(BatchRecord {
                key: Some(&key[..]),
                value: if i == 3 { None } else { Some(value.as_bytes()) },
                timestamp_delta: i as i64 * 10,
            });
        }
        let mut bytes = builder.build_compressed(codec).expect("build");
        bytes[0..8].copy_from_slice(&1000i64.to_be_bytes());
        bytes
    }

    #[test]
    fn kept_records_and_header_fields_survive_the_rewrite_for_every_codec() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bytes = batch(codec);
            let header = RecordBatchHeader::parse(&bytes, 1 << 20).expect("batch");
            let mut seen = Vec::new();
            for_each_record(&header, |r| {
                seen.push((r.offset, r.key.map(<[u8]>::to_vec), r.is_tombstone))
            })
            .expect("records");
            assert_eq!(seen.len(), 4);
            assert_eq!(seen[3], (1003, Some(b"c".to_vec()), true));
            // Keep the latest of each key: offsets 1001 (b), 1002 (a), 1003 (c, tombstone).
            let rewritten =
                retain_records(&header, |r| r.offset != 1000).expect("rewrite").expect("changed");
            let new = RecordBatchHeader::parse(&rewritten, 1 << 20).expect("valid batch");
            new.verify_crc().expect("crc");
            assert_eq!(new.base_offset(), 1000);
            assert_eq!(new.last_offset(), 1003, "the offset range is kept");
            assert_eq!(new.record_count(), 3);
            assert_eq!((new.producer_id(), new.producer_epoch(), new.base_sequence()), (5, 1, 100));
            assert_eq!(new.max_timestamp(), header.max_timestamp());
            assert_eq!(new.compression(), codec);
            let records = crate::compression::records_of(&new).expect("records");
            assert_eq!(records.iter().map(|r| r.offset_delta).collect::<Vec<_>>(), vec![1, 2, 3]);
            assert_eq!(records[1].value.as_deref(), Some(&b"value-2"[..]));
            assert_eq!(records[1].timestamp_delta, 20);
            // Nothing dropped: no rewrite. Everything dropped: an empty batch with its range.
            assert_eq!(retain_records(&header, |_| true).expect("ok"), None);
            let empty = retain_records(&header, |_| false).expect("ok").expect("changed");
            let empty = RecordBatchHeader::parse(&empty, 1 << 20).expect("valid");
            empty.verify_crc().expect("crc");
            assert_eq!(
                (empty.record_count(), empty.last_offset(), empty.size_bytes()),
                (0, 1003, 61)
            );
            assert_eq!(empty.compression(), Compression::None, "empty batches are uncompressed");
        }
    }
}
