//! One segment of a partition log: a `.log` file of whole record batches with its in-memory
//! indexes, and the scan that validates a segment and rebuilds its indexes.
//!
//! Invariants: a segment holds whole batches only; its first batch's base offset is the segment's
//! base offset (its file name); batch offsets are contiguous inside it; `size_bytes` is the
//! logical length, and bytes past it in the file (page padding from direct I/O) are zeros or
//! stale and never read as data.

use crate::batch_reader::{BatchReader, Next, ReadError};
use crate::checkpoint::{epoch_at, EpochEntry};
use crate::config::BATCH_BYTES_MAX;
use crate::index::{OffsetIndex, TimeIndex};
use crate::io::StorageFile;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use wire::RecordBatchHeader;

/// Bytes read at a time while scanning a segment.
pub const SCAN_CHUNK_BYTES: usize = 1 << 20;

pub fn log_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.log")
}
pub fn index_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.index")
}
pub fn time_index_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.timeindex")
}

/// Parses `<20 digits>.<extension>` into the base offset.
/// Appended to the name of a deleted segment's files until they are unlinked; `open` removes
/// any it finds.
pub const DELETED_SUFFIX: &str = ".deleted";

pub fn parse_segment_file_name(name: &str, extension: &str) -> Option<i64> {
    let stem = name.strip_suffix(extension)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// A segment's state in memory.
pub struct Segment<F> {
    pub base_offset: i64,
    /// The open file: always for the active segment; for a sealed one only while it is read
    /// (`PartitionLog::segment_file` opens it, and keeps at most `SEALED_FILES_OPEN_MAX` open
    /// per log), so a partition holds a bounded number of descriptors however many segments
    /// it has.
    pub file: Option<Rc<F>>,
    pub path: PathBuf,
    /// Logical length: the end of the last whole batch.
    pub size_bytes: u64,
    /// One past the last offset in the segment (`base_offset` when empty).
    pub next_offset: i64,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    /// The largest batch max-timestamp in the segment (-1 when empty or untimed).
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub bytes_since_index_entry: u64,
    /// When the segment was created (for `segment.ms`), in ms since the epoch.
    pub created_ms: i64,
    /// File bytes reserved with fallocate so far (active segment only).
    pub preallocated_end: u64,
}

impl<F> Segment<F> {
    pub fn relative(&self, offset: i64) -> u32 {
        let relative = offset - self.base_offset;
        assert!((0..=i64::from(u32::MAX)).contains(&relative), "offset outside segment");
        relative as u32
    }

    /// Records one appended (or scanned) batch at `position`, keeping the indexes as Kafka does:
    /// an offset-index entry once `index_interval_bytes` have passed since the last one, and a
    /// time-index entry alongside when the max timestamp grew.
    pub fn note_batch(&mut self, header: &RecordBatchHeader<'_>, position: u64, interval: u64) {
        assert_eq!(position, self.size_bytes, "batches are appended at the end");
        assert_eq!(header.base_offset(), self.next_offset, "contiguous offsets");
        if header.max_timestamp() > self.max_timestamp {
            self.max_timestamp = header.max_timestamp();
            self.offset_of_max_timestamp = header.last_offset();
        }
        if self.bytes_since_index_entry >= interval && position > 0 {
            let relative = self.relative(header.base_offset());
            self.index.push(relative, position as u32);
            if self.max_timestamp >= 0 {
                let relative_max = self.relative(self.offset_of_max_timestamp);
                self.time_index.maybe_push(self.max_timestamp, relative_max);
            }
            self.bytes_since_index_entry = 0;
        }
        self.bytes_since_index_entry += header.size_bytes() as u64;
        self.size_bytes += header.size_bytes() as u64;
        self.next_offset = header.last_offset() + 1;
    }

    /// Adds the final time-index entry for the segment's max timestamp (at seal and close), so the
    /// time index alone tells the segment's largest timestamp.
    pub fn seal_time_index(&mut self) {
        if self.max_timestamp >= 0 && self.next_offset > self.base_offset {
            let relative_max = self.relative(self.offset_of_max_timestamp);
            self.time_index.maybe_push(self.max_timestamp, relative_max);
        }
    }
}

/// What a scan found.
pub struct ScanOutcome {
    pub valid_bytes: u64,
    pub next_offset: i64,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub bytes_since_index_entry: u64,
    /// Why the scan stopped before the end of the file, if it did.
    pub stopped_early: Option<String>,
}

/// Reads a segment from the start, validating every batch (length, magic 2, CRC32C, contiguous
/// offsets from `base_offset`, leader epoch consistent with `epochs`), and rebuilds its indexes.
/// Invalid content stops the scan (the caller truncates there); an I/O error is returned as an
/// error and never treated as invalid content.
pub async fn scan_segment<F: StorageFile>(
    file: &F,
    path: &Path,
    base_offset: i64,
    index_interval_bytes: u64,
    epochs: &[EpochEntry],
) -> io::Result<ScanOutcome> {
    let file_size = file.size().await?;
    let mut segment = Segment {
        base_offset,
        file: Some(Rc::new(())),
        path: path.to_path_buf(),
        size_bytes: 0,
        next_offset: base_offset,
        index: OffsetIndex::default(),
        time_index: TimeIndex::default(),
        max_timestamp: -1,
        offset_of_max_timestamp: base_offset,
        bytes_since_index_entry: 0,
        created_ms: 0,
        preallocated_end: 0,
    };
    let mut reader = BatchReader::new(file, 0, file_size, base_offset, Some(base_offset));
    reader.set_read_hint(SCAN_CHUNK_BYTES);
    let mut stopped_early = None;
    let mut last_epoch = i32::MIN;
    loop {
        let position = reader.position();
        let batch = match reader.next(|_| true).await {
            Ok(Next::Batch(batch)) => batch,
            Ok(Next::End | Next::TooLarge(_)) => break,
            Err(ReadError::Io(error)) => return Err(error),
            Err(ReadError::Invalid { position, reason }) => {
                stopped_early = Some(format!("at position {position}: {reason}"));
                break;
            }
        };
        // The reader checked length, magic, CRC32C and contiguous offsets; the segment's own
        // rules follow.
        let header = match RecordBatchHeader::parse(&batch.bytes, BATCH_BYTES_MAX) {
            Ok(header) => header,
            Err(error) => {
                stopped_early = Some(format!("at position {position}: {error}"));
                break;
            }
        };
        if header.last_offset() - base_offset > i64::from(u32::MAX) {
            stopped_early = Some(format!("at position {position}: offset beyond segment range"));
            break;
        }
        let epoch = header.partition_leader_epoch();
        let expected_epoch = epoch_at(epochs, header.base_offset());
        if (!epochs.is_empty() && expected_epoch != Some(epoch)) || epoch < last_epoch {
            stopped_early = Some(format!(
                "at position {position}: leader epoch {epoch}, history says {expected_epoch:?}"
            ));
            break;
        }
        last_epoch = epoch;
        segment.note_batch(&header, position, index_interval_bytes);
    }
    Ok(ScanOutcome {
        valid_bytes: segment.size_bytes,
        next_offset: segment.next_offset,
        index: segment.index,
        time_index: segment.time_index,
        max_timestamp: segment.max_timestamp,
        offset_of_max_timestamp: segment.offset_of_max_timestamp,
        bytes_since_index_entry: segment.bytes_since_index_entry,
        stopped_early,
    })
}
