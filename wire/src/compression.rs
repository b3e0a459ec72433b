//! Record-batch compression codecs (gzip, snappy, lz4, zstd) for the few places that must read
//! records: the CLI, timestamp lookups, tests. The broker never recompresses a client's batch.
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

/// Compresses a records section the way Kafka clients do (snappy in xerial framing).
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, DecodeError> {
    use std::io::Write;
    let failed = |_| DecodeError::BadRecord("compression failed");
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
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
        Compression::Zstd => zstd::stream::encode_all(input, 3).map_err(failed),
        Compression::Unknown(_) => Err(DecodeError::BadRecord("unknown compression codec")),
    }
}

/// One record with its bytes owned (decoded from a possibly compressed batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRecord {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// Decodes every record of a batch, decompressing it first if needed.
pub fn records_of(header: &RecordBatchHeader<'_>) -> Result<Vec<OwnedRecord>, DecodeError> {
    let owned = |view: crate::record_batch::RecordView<'_>| OwnedRecord {
        offset_delta: view.offset_delta,
        timestamp_delta: view.timestamp_delta,
        key: view.key.map(<[u8]>::to_vec),
        value: view.value.map(<[u8]>::to_vec),
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
