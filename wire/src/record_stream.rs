//! Records of a compressed batch read as a stream: the decompressor feeds a small buffer and
//! each record is parsed as it comes out, keeping only its key, so checking a batch costs
//! memory for one key, not for the inflated batch. Used where the broker only needs to look at
//! records (`validate`, the produce-time check). The total inflated is bounded by the caller's
//! budget, at most `compression::DECOMPRESSED_BYTES_MAX`, so a "2 GiB of zeros" batch costs at
//! most that much inflation work and no memory. Snappy in the xerial framing (the Java client)
//! streams block by block; raw snappy (librdkafka) is one block, inflated whole, and its size
//! is read from its header and checked against the budget first.
//! Record layout: Kafka protocol guide, "Record" (message format v2).

use crate::compression::DECOMPRESSED_BYTES_MAX;
use crate::error::DecodeError;
use crate::record_batch::{Compression, RecordBatchHeader, BATCH_HEADER_BYTES};
use std::io::{BufRead, BufReader, Read};

/// Largest key kept while streaming (a longer one makes the batch invalid for this check).
pub const STREAMED_KEY_BYTES_MAX: usize = 1 << 20;
/// The buffer the decompressor fills (larger reads cost zstd and gzip less per byte).
const STREAM_BUFFER_BYTES: usize = 64 << 10;

fn inflate_failed(_: std::io::Error) -> DecodeError {
    DecodeError::BadRecord("compressed records do not decompress")
}

fn over_budget(budget: usize) -> DecodeError {
    if budget >= DECOMPRESSED_BYTES_MAX {
        DecodeError::BadRecord("records decompress past the size limit")
    } else {
        DecodeError::OverBudget { budget }
    }
}

/// Counts what it reads, and refuses to read past the inflation budget.
struct Bounded<R> {
    inner: R,
    consumed: usize,
    budget: usize,
}

impl<R: BufRead> Bounded<R> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let mut one = [0u8; 1];
        self.exact(&mut one)?;
        let [byte] = one;
        Ok(byte)
    }

    fn exact(&mut self, out: &mut [u8]) -> Result<(), DecodeError> {
        if self.consumed + out.len() > self.budget {
            return Err(over_budget(self.budget));
        }
        self.inner.read_exact(out).map_err(inflate_failed)?;
        self.consumed += out.len();
        Ok(())
    }

    /// Skips `len` bytes straight out of the decompressor's buffer (no copy).
    fn skip(&mut self, mut len: usize) -> Result<(), DecodeError> {
        if self.consumed + len > self.budget {
            return Err(over_budget(self.budget));
        }
        while len > 0 {
            let available = self.inner.fill_buf().map_err(inflate_failed)?.len();
            if available == 0 {
                return Err(DecodeError::BadRecord("records end inside a record"));
            }
            let step = len.min(available);
            self.inner.consume(step);
            self.consumed += step;
            len -= step;
        }
        Ok(())
    }

    fn varlong(&mut self) -> Result<i64, DecodeError> {
        let mut raw: u64 = 0;
        for index in 0..10 {
            let byte = self.byte()?;
            raw |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(DecodeError::VarintTooLong)
    }

    fn varint(&mut self) -> Result<i32, DecodeError> {
        i32::try_from(self.varlong()?).map_err(|_| DecodeError::VarintTooLong)
    }

    /// A nullable length: `None` for -1; lengths below -1 are invalid.
    fn length(&mut self) -> Result<Option<usize>, DecodeError> {
        match self.varint()? {
            -1 => Ok(None),
            len if len < 0 => Err(DecodeError::BadRecord("negative length")),
            len => Ok(Some(len as usize)),
        }
    }
}

/// Snappy in the xerial framing, one block at a time.
struct XerialReader<'a> {
    rest: &'a [u8],
    block: std::io::Cursor<Vec<u8>>,
}

impl Read for XerialReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let read = self.block.read(out)?;
            if read > 0 || out.is_empty() || self.rest.is_empty() {
                return Ok(read);
            }
            let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
            let len_bytes: [u8; 4] = self
                .rest
                .get(..4)
                .and_then(|bytes| bytes.try_into().ok())
                .ok_or_else(|| bad("truncated snappy block length"))?;
            let len = u32::from_be_bytes(len_bytes) as usize;
            let block = self.rest.get(4..4 + len).ok_or_else(|| bad("truncated snappy block"))?;
            self.rest = self.rest.get(4 + len..).unwrap_or_default();
            let inflated = snap::raw::decompress_len(block)
                .map_err(|_| bad("bad snappy block"))
                .and_then(|size| {
                    if size > SNAPPY_BLOCK_BYTES_MAX {
                        return Err(bad("snappy block too large"));
                    }
                    snap::raw::Decoder::new()
                        .decompress_vec(block)
                        .map_err(|_| bad("bad snappy block"))
                })?;
            self.block = std::io::Cursor::new(inflated);
        }
    }
}

/// Largest xerial snappy block inflated at once (the Java client writes 32 KiB blocks).
const SNAPPY_BLOCK_BYTES_MAX: usize = 4 << 20;
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

/// The decompressing reader of a batch's records section.
fn decoder<'a>(
    codec: Compression,
    body: &'a [u8],
    budget: usize,
) -> Result<Box<dyn Read + 'a>, DecodeError> {
    Ok(match codec {
        Compression::Gzip => Box::new(flate2::read::GzDecoder::new(body)),
        Compression::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(body)),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::new(body)
                .map_err(|_| DecodeError::BadRecord("bad zstd frame"))?,
        ),
        Compression::Snappy if body.starts_with(XERIAL_MAGIC) => Box::new(XerialReader {
            rest: body.get(XERIAL_HEADER_BYTES..).unwrap_or_default(),
            block: std::io::Cursor::new(Vec::new()),
        }),
        // Raw snappy is one block whose header states its size (at most ~21x the input).
        Compression::Snappy => {
            let size = snap::raw::decompress_len(body)
                .map_err(|_| DecodeError::BadRecord("bad snappy block"))?;
            if size > budget {
                return Err(over_budget(budget));
            }
            Box::new(std::io::Cursor::new(crate::compression::decompress(codec, body)?))
        }
        Compression::None => Box::new(body),
        Compression::Unknown(_) => return Err(DecodeError::BadRecord("unknown compression codec")),
    })
}

/// One record as the stream yields it: its deltas, its key (valid during the call), and
/// whether its value is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamedRecord<'a> {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<&'a [u8]>,
    pub is_tombstone: bool,
}

/// Calls `visit` for every record of a batch of any codec, streaming compressed ones, reading
/// at most `budget` inflated bytes (`DecodeError::OverBudget` past it, or `BadRecord` past
/// `DECOMPRESSED_BYTES_MAX`). Checks what the slice iterator checks: each record's fields fill
/// exactly its length, and no bytes follow the last record. `visit` may refuse a record.
pub fn stream_records(
    header: &RecordBatchHeader<'_>,
    budget: usize,
    mut visit: impl FnMut(StreamedRecord<'_>) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let body = header.as_bytes().get(BATCH_HEADER_BYTES..).unwrap_or_default();
    if header.record_count() <= 0 {
        return Ok(());
    }
    let budget = budget.min(DECOMPRESSED_BYTES_MAX);
    let mut reader = Bounded {
        inner: BufReader::with_capacity(
            STREAM_BUFFER_BYTES,
            decoder(header.compression(), body, budget)?,
        ),
        consumed: 0,
        budget,
    };
    let mut key = Vec::new();
    for _ in 0..header.record_count() {
        let length = reader.length()?.ok_or(DecodeError::BadRecord("null record length"))?;
        let start = reader.consumed;
        let _attributes = reader.byte()?;
        let timestamp_delta = reader.varlong()?;
        let offset_delta = reader.varint()?;
        let key_len = reader.length()?;
        if let Some(len) = key_len {
            if len > STREAMED_KEY_BYTES_MAX {
                return Err(DecodeError::BadRecord("record key too long"));
            }
            key.resize(len, 0);
            reader.exact(&mut key)?;
        }
        let value_len = reader.length()?;
        if let Some(len) = value_len {
            reader.skip(len)?;
        }
        let headers = reader.varint()?;
        for _ in 0..headers.max(0) {
            let header_key = reader.length()?.ok_or(DecodeError::BadRecord("null header key"))?;
            reader.skip(header_key)?;
            if let Some(len) = reader.length()? {
                reader.skip(len)?;
            }
        }
        if reader.consumed - start != length {
            return Err(DecodeError::BadRecord("record length disagrees with its fields"));
        }
        visit(StreamedRecord {
            offset_delta,
            timestamp_delta,
            key: key_len.map(|_| key.as_slice()),
            is_tombstone: value_len.is_none(),
        })?;
    }
    let mut extra = [0u8; 1];
    match reader.inner.read(&mut extra) {
        Ok(0) => Ok(()),
        Ok(_) => Err(DecodeError::BadRecord("bytes follow the last record")),
        Err(error) => Err(inflate_failed(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BatchRecord, RecordBatchBuilder};

    #[test]
    fn streamed_records_match_the_slice_iterator_for_every_codec() {
        let mut builder = RecordBatchBuilder::new(1_700_000_000_000);
        let values: Vec<String> = (0..40).map(|i| format!("value-{i}").repeat(i)).collect();
        for (i, value) in values.iter().enumerate() {
            let key = format!("key-{}", i % 7);
            builder.push(BatchRecord {
                key: (i % 5 != 0).then_some(key.as_bytes()),
                value: (i % 9 != 0).then_some(value.as_bytes()),
                timestamp_delta: i as i64,
            });
        }
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bytes = builder.build_compressed(codec).unwrap();
            let header = RecordBatchHeader::parse(&bytes, 1 << 20).unwrap();
            let (mut streamed, mut sliced) = (Vec::new(), Vec::new());
            stream_records(&header, DECOMPRESSED_BYTES_MAX, |r| {
                let offset = header.base_offset() + i64::from(r.offset_delta);
                streamed.push((offset, r.key.map(<[u8]>::to_vec), r.is_tombstone));
                Ok(())
            })
            .unwrap();
            crate::compaction::for_each_record(&header, |r| {
                sliced.push((r.offset, r.key.map(<[u8]>::to_vec), r.is_tombstone))
            })
            .unwrap();
            assert_eq!(streamed.len(), 40, "{codec:?}");
            assert_eq!(streamed, sliced, "{codec:?}");
        }
    }

    #[test]
    fn a_batch_inflating_past_the_bound_is_refused_after_at_most_the_bound() {
        // One record claiming a 100 MiB value of zeros: 100 KiB of zstd.
        let mut plain = Vec::new();
        let value_bytes = 100usize << 20;
        let mut body = vec![0u8, 0, 0];
        crate::varint::put_varint(&mut body, 1);
        body.push(b'k');
        crate::varint::put_varint(&mut body, value_bytes as i32);
        crate::varint::put_varint(&mut plain, (body.len() + value_bytes + 1) as i32);
        plain.extend_from_slice(&body);
        plain.resize(plain.len() + value_bytes, 0);
        plain.push(0);
        let compressed = zstd::stream::encode_all(&plain[..], 1).unwrap();
        let mut builder = RecordBatchBuilder::new(1);
        builder.push(BatchRecord { key: Some(b"k"), value: Some(b"x"), timestamp_delta: 0 });
        let mut batch = builder.build();
        batch.truncate(BATCH_HEADER_BYTES);
        batch[21..23].copy_from_slice(&4i16.to_be_bytes());
        batch.extend_from_slice(&compressed);
        let length = (batch.len() - crate::LOG_OVERHEAD_BYTES) as i32;
        batch[8..12].copy_from_slice(&length.to_be_bytes());
        let header = RecordBatchHeader::parse(&batch, 1 << 20).unwrap();
        assert_eq!(
            stream_records(&header, usize::MAX, |_| Ok(())),
            Err(DecodeError::BadRecord("records decompress past the size limit"))
        );
        assert_eq!(
            stream_records(&header, 1 << 20, |_| Ok(())),
            Err(DecodeError::OverBudget { budget: 1 << 20 })
        );
    }
}
