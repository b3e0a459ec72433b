//! Log compaction (`cleanup.policy=compact`): keeps the last record per key (Kafka's
//! `LogCleaner`).
//!
//! A run builds a map key → highest offset over the whole log (up to the log end when it
//! starts; later appends only make keys newer, so the run stays conservative), then rewrites
//! each sealed segment that holds a superseded record: every batch keeps its header and offset
//! range and loses only its superseded records (`wire::compaction`), so offsets stay
//! contiguous across batches (the invariant every reader and recovery relies on) and an emptied
//! batch stays as a 61-byte header. Tombstones (null values) that are the latest for their key
//! are removed once their batch is older than `delete.retention.ms`. Records without a key and
//! control batches are kept. The active segment is never rewritten.
//!
//! Crash safety: the new segment is written in full to `<segment>.log.cleaned.tmp` and synced
//! (removed at open if a crash leaves it); then, under the write lock, the old segment's index
//! files are removed, the new file is renamed over the old one and the directory synced, and
//! the indexes are written again. A crash at any point leaves the old or the new segment, both
//! valid, at worst without index files, which an open rebuilds.
//!
//! Runs on: the shard that owns the partition. The map is bounded by `COMPACTION_KEYS_MAX`.

use crate::error::{Result, StorageError};
use crate::io::{self, IoBuffer, Storage, StorageFile};
use crate::partition_log::{apply_scan, PartitionLog};
use crate::segment::{self, Segment};
use std::collections::HashMap;
use std::rc::Rc;
use wire::RecordBatchHeader;

/// Distinct keys one run may track (a 128-bit key hash and an offset each, ~32 MiB); a log
/// with more keys is left as it is and the run says so.
pub const COMPACTION_KEYS_MAX: usize = 1_000_000;
const READ_BYTES: usize = 1 << 20;
const WRITE_CHUNK_BYTES: usize = 1 << 20;

/// What a compaction run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionOutcome {
    pub segments_rewritten: usize,
    pub records_removed: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// 128-bit key hashes from two independently seeded hashers (collisions would drop a live
/// record, so 64 bits are not enough at millions of keys).
struct KeyHasher(std::collections::hash_map::RandomState, std::collections::hash_map::RandomState);

impl KeyHasher {
    fn new() -> Self {
        KeyHasher(Default::default(), Default::default())
    }

    fn hash(&self, key: &[u8]) -> u128 {
        use std::hash::BuildHasher;
        (u128::from(self.0.hash_one(key)) << 64) | u128::from(self.1.hash_one(key))
    }
}

impl<S: Storage> PartitionLog<S> {
    /// Compacts when the topic is compacted and a segment was sealed since the last run (or
    /// none ran since the log was opened).
    pub async fn compact_if_due(&self, now_ms: i64) -> Result<Option<CompactionOutcome>> {
        if !self.config.borrow().cleanup_compact {
            return Ok(None);
        }
        let sealed_end = self.segment_base_offsets().last().copied().unwrap_or(0);
        if self.compacted_sealed_end.get() == Some(sealed_end) {
            return Ok(None);
        }
        let outcome = self.compact(now_ms).await?;
        self.compacted_sealed_end.set(Some(sealed_end));
        Ok(Some(outcome))
    }

    /// One compaction run (see the module header). `now_ms` dates tombstones.
    pub async fn compact(&self, now_ms: i64) -> Result<CompactionOutcome> {
        let mut outcome = CompactionOutcome::default();
        let hasher = KeyHasher::new();
        let Some(latest) = self.latest_offsets(&hasher).await? else {
            tracing::warn!(dir = %self.dir.display(), keys_max = COMPACTION_KEYS_MAX, "too many keys to compact in one run; left as it is");
            return Ok(outcome);
        };
        let tombstone_horizon = now_ms.saturating_sub(
            i64::try_from(self.config.borrow().delete_retention_ms).unwrap_or(i64::MAX),
        );
        let sealed: Vec<(i64, i64, u64)> = {
            let state = self.state.borrow();
            let count = state.segments.len();
            state
                .segments
                .values()
                .take(count.saturating_sub(1))
                .filter(|segment| segment.next_offset > state.log_start_offset)
                .map(|segment| (segment.base_offset, segment.next_offset, segment.size_bytes))
                .collect()
        };
        for (base, next_offset, size) in sealed {
            let keep =
                |record: wire::compaction::RecordRef<'_>, max_timestamp: i64| match record.key {
                    None => true,
                    Some(key) => {
                        let newest =
                            latest.get(&hasher.hash(key)).is_none_or(|&at| at <= record.offset);
                        newest && !(record.is_tombstone && max_timestamp < tombstone_horizon)
                    }
                };
            if let Some((removed, new_size)) =
                self.rewrite_segment(base, next_offset, size, keep).await?
            {
                outcome.segments_rewritten += 1;
                outcome.records_removed += removed;
                outcome.bytes_before += size;
                outcome.bytes_after += new_size;
            }
        }
        if outcome.segments_rewritten > 0 {
            tracing::info!(dir = %self.dir.display(), segments = outcome.segments_rewritten, records_removed = outcome.records_removed, bytes_before = outcome.bytes_before, bytes_after = outcome.bytes_after, "compacted");
        }
        Ok(outcome)
    }

    /// key hash → highest offset, over the log as it is now; `None` past `COMPACTION_KEYS_MAX`.
    async fn latest_offsets(&self, hasher: &KeyHasher) -> Result<Option<HashMap<u128, i64>>> {
        let end = self.log_end_offset();
        let mut offset = self.log_start_offset();
        let mut latest: HashMap<u128, i64> = HashMap::new();
        while offset < end {
            let read = self.read(offset, READ_BYTES).await?;
            if read.batches.is_empty() {
                break;
            }
            for bytes in &read.batches {
                let header = RecordBatchHeader::parse(bytes, crate::config::BATCH_BYTES_MAX)?;
                if !header.is_control() {
                    wire::compaction::for_each_record(&header, |record| {
                        if let Some(key) = record.key {
                            latest.insert(hasher.hash(key), record.offset);
                        }
                    })?;
                }
                offset = header.last_offset() + 1;
            }
            if latest.len() > COMPACTION_KEYS_MAX {
                return Ok(None);
            }
        }
        Ok(Some(latest))
    }

    /// The next read's worth of batches of a segment ending at `next_offset`, starting at
    /// `*offset` and moving it past them; empty at the segment's end.
    async fn segment_batches(
        &self,
        offset: &mut i64,
        next_offset: i64,
    ) -> Result<Vec<bytes::Bytes>> {
        if *offset >= next_offset {
            return Ok(Vec::new());
        }
        let mut batches = self.read(*offset, READ_BYTES).await?.batches;
        let mut keep = 0;
        for bytes in &batches {
            let header = RecordBatchHeader::parse(bytes, crate::config::BATCH_BYTES_MAX)?;
            if header.base_offset() >= next_offset {
                break;
            }
            *offset = header.last_offset() + 1;
            keep += 1;
        }
        if keep < batches.len() || batches.is_empty() {
            *offset = next_offset;
        }
        batches.truncate(keep);
        Ok(batches)
    }

    /// Rewrites the sealed segment at `base` keeping the records `keep` accepts: (records
    /// removed, new size), or `None` when it keeps them all (nothing written) or the segment
    /// changed meanwhile (retention, truncation). Reads the segment twice (a check, then the
    /// copy) so memory stays bounded by one read.
    async fn rewrite_segment(
        &self,
        base: i64,
        next_offset: i64,
        size: u64,
        keep: impl Fn(wire::compaction::RecordRef<'_>, i64) -> bool,
    ) -> Result<Option<(u64, u64)>> {
        let first = base.max(self.log_start_offset());
        let mut removable = 0u64;
        let mut offset = first;
        loop {
            let batches = self.segment_batches(&mut offset, next_offset).await?;
            if batches.is_empty() {
                break;
            }
            for bytes in &batches {
                let header = RecordBatchHeader::parse(bytes, crate::config::BATCH_BYTES_MAX)?;
                if !header.is_control() {
                    let max_timestamp = header.max_timestamp();
                    wire::compaction::for_each_record(&header, |record| {
                        removable += u64::from(!keep(record, max_timestamp));
                    })?;
                }
            }
        }
        if removable == 0 {
            return Ok(None);
        }
        let log_path = self.dir.join(segment::log_file_name(base));
        let temporary = self.dir.join(format!("{}.cleaned.tmp", segment::log_file_name(base)));
        let file = self.storage.open(&temporary, true).await?;
        file.truncate(0).await?;
        let mut writer = ChunkWriter::new(file);
        let mut removed = 0u64;
        let mut offset = first;
        loop {
            let batches = self.segment_batches(&mut offset, next_offset).await?;
            if batches.is_empty() {
                break;
            }
            for bytes in &batches {
                let header = RecordBatchHeader::parse(bytes, crate::config::BATCH_BYTES_MAX)?;
                let max_timestamp = header.max_timestamp();
                let rewritten = if header.is_control() {
                    None
                } else {
                    wire::compaction::retain_records(&header, |record| {
                        let kept = keep(record, max_timestamp);
                        removed += u64::from(!kept);
                        kept
                    })?
                };
                writer.write(rewritten.as_deref().unwrap_or(bytes)).await?;
            }
        }
        let new_size = writer.logical_end();
        let file = writer.finish().await?;
        self.storage.close(file).await?;

        // The swap, under the write lock: the segment must be the one that was read.
        let _write = self.write_lock.lock().await;
        self.check_writable()?;
        let unchanged = {
            let state = self.state.borrow();
            let newer_exists = state.segments.range(base + 1..).next().is_some();
            state.segments.get(&base).is_some_and(|segment| {
                segment.size_bytes == size && segment.next_offset == next_offset && newer_exists
            }) && base >= state.segments.keys().next().copied().unwrap_or(i64::MAX)
        };
        if !unchanged {
            self.storage.remove(&temporary).await?;
            return Ok(None);
        }
        let result = self.swap_segment(base, &log_path, &temporary).await;
        self.offline_on_error(result)?;
        Ok(Some((removed, new_size)))
    }

    /// Replaces the segment at `base` with the file at `temporary`. Caller holds `write_lock`.
    async fn swap_segment(
        &self,
        base: i64,
        log_path: &std::path::Path,
        temporary: &std::path::Path,
    ) -> Result<()> {
        self.mutations.set(self.mutations.get() + 1);
        self.drop_read_ahead();
        for name in [segment::index_file_name(base), segment::time_index_file_name(base)] {
            let path = self.dir.join(name);
            if self.storage.exists(&path).await? {
                self.storage.remove(&path).await?;
            }
        }
        self.storage.sync_dir(&self.dir).await?;
        self.storage.rename(temporary, log_path).await?;
        self.storage.sync_dir(&self.dir).await?;
        let file = self.storage.open(log_path, true).await?;
        let (interval, epochs) =
            (self.config.borrow().index_interval_bytes, self.state.borrow().epochs.clone());
        let scan = segment::scan_segment(&file, log_path, base, interval, &epochs).await?;
        if let Some(reason) = &scan.stopped_early {
            return Err(StorageError::Corrupt {
                path: log_path.to_path_buf(),
                reason: format!("compacted segment does not scan: {reason}"),
            });
        }
        let created_ms = self.state.borrow().segments.get(&base).map_or(0, |s| s.created_ms);
        let mut fresh = crate::partition_log::new_segment(
            base,
            Rc::new(file),
            log_path.to_path_buf(),
            created_ms,
        );
        apply_scan(&mut fresh, scan);
        fresh.seal_time_index();
        let (index, time_index) = (fresh.index.encode(), fresh.time_index.encode());
        let old: Option<Segment<S::File>> = self.state.borrow_mut().segments.insert(base, fresh);
        io::write_file_atomic(
            &self.storage,
            &self.dir.join(segment::index_file_name(base)),
            &index,
        )
        .await?;
        io::write_file_atomic(
            &self.storage,
            &self.dir.join(segment::time_index_file_name(base)),
            &time_index,
        )
        .await?;
        self.cache.borrow_mut().forget(self.cache_key);
        self.note_files_open();
        if let Some(old) = old {
            if let Some(Ok(file)) = old.file.map(Rc::try_unwrap) {
                self.storage.close(file).await?;
            }
        }
        Ok(())
    }
}

/// Writes a file sequentially in aligned direct-I/O chunks.
struct ChunkWriter<F: StorageFile> {
    file: F,
    pending: Vec<u8>,
    position: u64,
}

impl<F: StorageFile> ChunkWriter<F> {
    fn new(file: F) -> Self {
        ChunkWriter { file, pending: Vec::with_capacity(WRITE_CHUNK_BYTES * 2), position: 0 }
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.pending.extend_from_slice(bytes);
        while self.pending.len() >= WRITE_CHUNK_BYTES {
            let mut buffer = self.file.alloc_buffer(WRITE_CHUNK_BYTES);
            if let (Some(target), Some(source)) = (
                buffer.as_mut_slice().get_mut(..WRITE_CHUNK_BYTES),
                self.pending.get(..WRITE_CHUNK_BYTES),
            ) {
                target.copy_from_slice(source);
            }
            self.file.write_at(buffer, self.position).await?;
            self.position += WRITE_CHUNK_BYTES as u64;
            self.pending.drain(..WRITE_CHUNK_BYTES);
        }
        Ok(())
    }

    fn logical_end(&self) -> u64 {
        self.position + self.pending.len() as u64
    }

    /// Writes the rest (zero-padded to the alignment, then trimmed) and syncs.
    async fn finish(self) -> Result<F> {
        let logical_end = self.position + self.pending.len() as u64;
        if !self.pending.is_empty() {
            let padded = io::align_up(self.pending.len() as u64) as usize;
            let mut buffer = self.file.alloc_buffer(padded);
            let target = buffer.as_mut_slice();
            if let Some(prefix) = target.get_mut(..self.pending.len()) {
                prefix.copy_from_slice(&self.pending);
            }
            if let Some(padding) = target.get_mut(self.pending.len()..) {
                padding.fill(0);
            }
            self.file.write_at(buffer, self.position).await?;
        }
        self.file.truncate(logical_end).await?;
        self.file.sync().await?;
        Ok(self.file)
    }
}
