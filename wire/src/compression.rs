//! Record-batch compression codecs (gzip, snappy, lz4, zstd) for the few places that must read
//! records (the CLI, timestamp lookups, tests) and for `recompress`, which rewrites a batch in
//! a topic's `compression.type` (the broker otherwise stores a client's batch as it came).
//!
//! Formats as Kafka writes them: gzip with its header (RFC 1952); snappy either raw or in the
//! xerial framing the Java client uses (magic `\x82SNAPPY\0`, then length-prefixed blocks); lz4
//! in the LZ4 frame format (KIP-57); zstd frames.
//! Invariant: decompression stops at `DECOMPRESSED_BYTES_MAX`, so a small hostile batch cannot
//! expand without bound (the output buffer grows in steps as bytes come out, never sized from
//! a length the input claims).

use crate::record_batch::{Compression, DecodeError, RecordBatchHeader, BATCH_HEADER_BYTES};
use std::io::Read;

/// The most bytes one batch may decompress to. A batch the broker must read (the key check of
/// compacted topics, compaction, offsets replay) that inflates past it is refused, after at most
/// this much was inflated: a small hostile batch ("2 GiB of zeros") cannot grow the broker.
/// The produce-time check streams instead (`record_stream`), on the shard for batches that
/// inflate little and on the offload threads past that (`shard::runtime::offload`).
pub const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

fn bounded_read(mut reader: impl Read) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    reader
        .by_ref()
        .take(DECOMPRESSED_BYTES_MAX as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|_| DecodeError::BadRecord("compressed records do not decompress"))?;
    if out.len() > DECOMPRESSED_BYTES_MAX {
        return Err(DecodeError::BadRecord("records decompress past the size limit"));
    }
    Ok(out)
}

fn snappy_raw(input: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let len =
        snap::raw::decompress_len(input).map_err(|_| DecodeError::BadRecord("bad snappy block"))?;
    if len > DECOMPRESSED_BYTES_MAX {
        return Err(DecodeError::BadRecord("records decompress past the size limit"));
    }
    snap::raw::Decoder::new()
        .decompress_vec(input)
        .map_err(|_| DecodeError::BadRecord("bad snappy block"))
}

/// Decompresses a batch's records section.
pub fn decompress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, DecodeError> {
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => bounded_read(flate2::read::GzDecoder::new(input)),
        Compression::Snappy => {
            if input.starts_with(XERIAL_MAGIC) {
                let mut out = Vec::new();
                let mut rest = input.get(XERIAL_HEADER_BYTES..).unwrap_or_default();
                while !rest.is_empty() {
                    let len_bytes: [u8; 4] = rest
                        .get(..4)
                        .and_then(|b| b.try_into().ok())
                        .ok_or(DecodeError::BadRecord("truncated snappy block length"))?;
                    let len = u32::from_be_bytes(len_bytes) as usize;
                    let block = rest
                        .get(4..4 + len)
                        .ok_or(DecodeError::BadRecord("truncated snappy block"))?;
                    out.extend_from_slice(&snappy_raw(block)?);
                    if out.len() > DECOMPRESSED_BYTES_MAX {
                        return Err(DecodeError::BadRecord(
                            "records decompress past the size limit",
                        ));
                    }
                    rest = rest.get(4 + len..).unwrap_or_default();
                }
                Ok(out)
            } else {
                snappy_raw(input)
            }
        }
        Compression::Lz4 => bounded_read(lz4_flex::frame::FrameDecoder::new(input)),
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(input)
                .map_err(|_| DecodeError::BadRecord("bad zstd frame"))?;
            bounded_read(decoder)
        }
        Compression::Unknown(_) => Err(DecodeError::BadRecord("unknown compression codec")),
    }
}

/// Compresses a records section the way Kafka clients do (snappy in xerial framing), at each
/// codec's default level.
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, DecodeError> {
    compress_at(codec, input, None)
}

/// `compress` at a level (KIP-390: gzip 1-9, zstd -131072..=22; `None` or another codec: the
/// default). lz4 has no level here: `lz4_flex` writes its one (fast) level.
pub fn compress_at(
    codec: Compression,
    input: &[u8],
    level: Option<i32>,
) -> Result<Vec<u8>, DecodeError> {
    use std::io::Write;
    let failed = |_| DecodeError::BadRecord("compression failed");
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => {
            let level = match level {
                Some(level @ 1..=9) => flate2::Compression::new(level as u32),
                _ => flate2::Compression::default(),
            };
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
            encoder.write_all(input).map_err(failed)?;
            encoder.finish().map_err(failed)
        }
        Compression::Snappy => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            for block in input.chunks(32 << 10) {
                let compressed = snap::raw::Encoder::new()
                    .compress_vec(block)
                    .map_err(|_| DecodeError::BadRecord("compression failed"))?;
                out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
            encoder.write_all(input).map_err(failed)?;
            encoder.finish().map_err(|_| DecodeError::BadRecord("compression failed"))
        }
        Compression::Zstd => zstd::stream::encode_all(input, level.unwrap_or(3)).map_err(failed),
        Compression::Unknown(_) => Err(DecodeError::BadRecord("unknown compression codec")),
    }
}

/// The batch in another codec (Kafka's LogValidator re-compressing into a topic's
/// `compression.type`): the records section is decompressed and compressed again; the header
/// keeps every field (offsets, timestamps, producer, the other attribute bits) except the
/// length, the codec bits and the CRC. The records themselves must already be checked.
pub fn recompress(
    header: &RecordBatchHeader<'_>,
    target: Compression,
    level: Option<i32>,
) -> Result<Vec<u8>, DecodeError> {
    let body = header.as_bytes().get(BATCH_HEADER_BYTES..).unwrap_or_default();
    let plain = decompress(header.compression(), body)?;
    let records = compress_at(target, &plain, level)?;
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + records.len());
    out.extend_from_slice(header.as_bytes().get(..BATCH_HEADER_BYTES).unwrap_or_default());
    out.extend_from_slice(&records);
    let codec_bits: i16 = match target {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
        Compression::Unknown(_) => return Err(DecodeError::BadRecord("unknown compression codec")),
    };
    crate::record_batch::rewrite_length_codec_and_crc(&mut out, codec_bits)?;
    Ok(out)
}

/// One record with its bytes owned (decoded from a possibly compressed batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRecord {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Decodes every record of a batch, decompressing it first if needed.
pub fn records_of(header: &RecordBatchHeader<'_>) -> Result<Vec<OwnedRecord>, DecodeError> {
    let owned = |view: crate::record_batch::RecordView<'_>| OwnedRecord {
        offset_delta: view.offset_delta,
        timestamp_delta: view.timestamp_delta,
        key: view.key.map(<[u8]>::to_vec),
        value: view.value.map(<[u8]>::to_vec),
        headers: view
            .headers()
            .into_iter()
            .map(|(key, value)| (key.to_vec(), value.map(<[u8]>::to_vec)))
            .collect(),
    };
    if header.compression() == Compression::None {
        return header.records().map(|record| record.map(owned)).collect();
    }
    let body = header.as_bytes().get(BATCH_HEADER_BYTES..).unwrap_or_default();
    let plain = decompress(header.compression(), body)?;
    crate::record_batch::RecordIter::over(&plain, header.record_count())
        .map(|record| record.map(owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recompress_keeps_every_record_and_header_field() {
        let mut builder = crate::RecordBatchBuilder::new(1_700_000_000_000);
        builder.producer(9, 2, 40);
        for i in 0..50u8 {
            let value = vec![i; 200];
            builder.push(crate::BatchRecord {
                key: Some(&[i]),
                value: Some(&value),
                timestamp_delta: i64::from(i),
            });
        }
        let plain = builder.build();
        let header = RecordBatchHeader::parse(&plain, 1 << 20).unwrap();
        let original = records_of(&header).unwrap();
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
            let packed = recompress(&header, codec, Some(1)).unwrap();
            let packed_header = RecordBatchHeader::parse(&packed, 1 << 20).unwrap();
            packed_header.verify_crc().unwrap();
            assert_eq!(packed_header.compression(), codec);
            assert!(packed.len() < plain.len() / 4, "{codec:?} compresses repeated values");
            assert_eq!(records_of(&packed_header).unwrap(), original, "{codec:?}");
            assert_eq!(
                (
                    packed_header.producer_id(),
                    packed_header.producer_epoch(),
                    packed_header.base_sequence()
                ),
                (9, 2, 40)
            );
            assert_eq!(packed_header.max_timestamp(), header.max_timestamp());
            // And back: byte for byte the batch it was.
            assert_eq!(
                recompress(&packed_header, Compression::None, None).unwrap(),
                plain,
                "{codec:?}"
            );
        }
    }

    #[test]
    fn compressed_batches_decode_to_the_same_records() {
        let mut builder = crate::RecordBatchBuilder::new(1000);
        let values: Vec<Vec<u8>> =
            (0..50).map(|i| format!("value-{i}").repeat(20).into_bytes()).collect();
        for (i, value) in values.iter().enumerate() {
            builder.push(crate::BatchRecord {
                key: None,
                value: Some(value),
                timestamp_delta: i as i64,
            });
        }
        let plain = builder.build();
        let plain_records =
            records_of(&RecordBatchHeader::parse(&plain, 1 << 20).unwrap()).unwrap();
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
            let bytes = builder.build_compressed(codec).unwrap();
            let header = RecordBatchHeader::parse(&bytes, 1 << 20).unwrap();
            header.verify_crc().unwrap();
            assert_eq!(header.compression(), codec);
            assert!(bytes.len() < plain.len(), "{codec:?} compresses repetitive values");
            assert_eq!(records_of(&header).unwrap(), plain_records, "{codec:?}");
        }
    }

    #[test]
    fn every_codec_round_trips_and_rejects_garbage() {
        let input: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let compressed = compress(codec, &input).unwrap();
            assert_eq!(decompress(codec, &compressed).unwrap(), input, "{codec:?}");
            if codec != Compression::None {
                assert!(decompress(codec, b"definitely not compressed").is_err(), "{codec:?}");
            }
        }
        let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw).unwrap(), input, "raw snappy too");
    }
}
