//! The one reader of record batches from a segment file, shared by the disk read path
//! (`PartitionLog::read`, and so compaction, which reads through it) and recovery
//! (`segment::scan_segment`).
//!
//! It checks every batch as the write path did before writing it: the length (within
//! `BATCH_BYTES_MAX`, not past the end), the header (magic 2), the CRC32C, and base offsets
//! contiguous from one batch to the next and not below the segment's base. What it finds wrong
//! is `ReadError::Invalid` (recovery truncates there; a read reports the partition corrupt);
//! an I/O error is `ReadError::Io` and never taken for invalid content.
//! Reads are chunked: one disk read brings at least `DISK_READ_BYTES_MIN` (or the caller's
//! hint), and batches are slices of it (`Bytes`, no copy per batch).
//! Runs on: the shard that owns the file.

use crate::config::BATCH_BYTES_MAX;
use crate::io::StorageFile;
use bytes::Bytes;
use std::io;
use wire::record_batch::batch_size_from_prefix;
use wire::{RecordBatchHeader, LOG_OVERHEAD_BYTES};

/// Smallest read issued from disk.
pub const DISK_READ_BYTES_MIN: usize = 64 << 10;

#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// The bytes at `position` are not a valid next batch.
    Invalid {
        position: u64,
        reason: String,
    },
}

impl From<io::Error> for ReadError {
    fn from(error: io::Error) -> Self {
        ReadError::Io(error)
    }
}

/// One checked batch and where it starts in the file.
pub struct ReadBatch {
    pub position: u64,
    pub bytes: Bytes,
    pub base_offset: i64,
    pub last_offset: i64,
}

/// What the reader found next.
pub enum Next {
    Batch(ReadBatch),
    /// The next batch is larger than the caller accepts (`next`'s `fits`); not read.
    TooLarge(usize),
    /// `end` reached.
    End,
}

pub struct BatchReader<'a, F: StorageFile> {
    file: &'a F,
    position: u64,
    end: u64,
    segment_base: i64,
    expected_base: Option<i64>,
    chunk: Bytes,
    chunk_start: u64,
    read_hint: usize,
}

impl<'a, F: StorageFile> BatchReader<'a, F> {
    /// Reads batches of `file` from `position` (a batch boundary) to `end`. `expected_base`: the
    /// base offset the first batch must have, when the caller knows it.
    pub fn new(
        file: &'a F,
        position: u64,
        end: u64,
        segment_base: i64,
        expected_base: Option<i64>,
    ) -> Self {
        BatchReader {
            file,
            position,
            end,
            segment_base,
            expected_base,
            chunk: Bytes::new(),
            chunk_start: position,
            read_hint: DISK_READ_BYTES_MIN,
        }
    }

    /// `new`, with `chunk` already read from `position` (a read issued ahead).
    pub fn with_chunk(
        file: &'a F,
        position: u64,
        end: u64,
        segment_base: i64,
        expected_base: Option<i64>,
        chunk: Bytes,
    ) -> Self {
        let mut reader = Self::new(file, position, end, segment_base, expected_base);
        reader.chunk = chunk;
        reader
    }

    /// Where the next batch starts.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// How much the next disk read should bring (at least `DISK_READ_BYTES_MIN`).
    pub fn set_read_hint(&mut self, bytes: usize) {
        self.read_hint = bytes.max(DISK_READ_BYTES_MIN);
    }

    fn invalid(&self, reason: String) -> ReadError {
        ReadError::Invalid { position: self.position, reason }
    }

    /// Makes the chunk hold file bytes `[position, position + len)`.
    async fn ensure(&mut self, len: usize) -> Result<(), ReadError> {
        let chunk_end = self.chunk_start + self.chunk.len() as u64;
        if self.position >= self.chunk_start && self.position + len as u64 <= chunk_end {
            return Ok(());
        }
        let want = (self.end - self.position).min(len.max(self.read_hint) as u64) as usize;
        let read = self.file.read_at(self.position, want).await?;
        if read.as_ref().len() < len {
            return Err(
                self.invalid(format!("short read: {} of {want} bytes", read.as_ref().len()))
            );
        }
        self.chunk = Bytes::copy_from_slice(read.as_ref());
        self.chunk_start = self.position;
        Ok(())
    }

    fn at(&self) -> Bytes {
        self.chunk.slice((self.position - self.chunk_start) as usize..)
    }

    /// The next checked batch, or `TooLarge` when `fits(size)` refuses its size (the batch is
    /// then not read and the reader stays before it), or `End`.
    pub async fn next(&mut self, fits: impl Fn(usize) -> bool) -> Result<Next, ReadError> {
        if self.position >= self.end {
            return Ok(Next::End);
        }
        if self.end - self.position < LOG_OVERHEAD_BYTES as u64 {
            let left = self.end - self.position;
            return Err(self.invalid(format!("{left} trailing bytes too short for a batch")));
        }
        self.ensure(LOG_OVERHEAD_BYTES).await?;
        let size = batch_size_from_prefix(&self.at(), BATCH_BYTES_MAX)
            .map_err(|error| self.invalid(error.to_string()))?;
        if self.position + size as u64 > self.end {
            return Err(self.invalid(format!("batch of {size} bytes cut short")));
        }
        if !fits(size) {
            return Ok(Next::TooLarge(size));
        }
        self.ensure(size).await?;
        let bytes = self.at().slice(..size);
        let header = RecordBatchHeader::parse(&bytes, BATCH_BYTES_MAX)
            .and_then(|header| header.verify_crc().map(|()| header))
            .map_err(|error| self.invalid(error.to_string()))?;
        if let Some(expected) = self.expected_base {
            if header.base_offset() != expected {
                return Err(self.invalid(format!(
                    "base offset {} where {expected} was expected",
                    header.base_offset()
                )));
            }
        }
        if header.base_offset() < self.segment_base {
            return Err(self.invalid(format!(
                "batch offset {} below the segment base {}",
                header.base_offset(),
                self.segment_base
            )));
        }
        let batch = ReadBatch {
            position: self.position,
            base_offset: header.base_offset(),
            last_offset: header.last_offset(),
            bytes,
        };
        self.expected_base = Some(batch.last_offset + 1);
        self.position += size as u64;
        Ok(Next::Batch(batch))
    }
}
