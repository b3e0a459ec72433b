//! `PartitionLog`: one partition's append-only log of Kafka v2 record batches.
//!
//! Owns: the partition directory `<data_dir>/<topic>-<partition>/` and everything in it:
//! segments (`.log`, `.index`, `.timeindex`), the log start offset and leader-epoch
//! checkpoints, and the clean-shutdown marker.
//!
//! Write path: an append validates the batch (framing, magic, CRC32C, size), assigns offsets by
//! patching the base offset and partition leader epoch in place, and copies it into the active
//! segment's tail: an aligned `write_chunk_bytes` direct-I/O buffer. A full chunk is submitted
//! at once and up to `WRITE_WINDOW` chunk writes stay in flight (write-behind, so copying the
//! next batches overlaps the disk). The partial last chunk is written, zero-padded to a page,
//! only when a sync, a roll or a disk read needs everything; the next write rewrites that page
//! with more data.
//!
//! Durability rule: under `FlushPolicy::Always` an append returns only after an fdatasync that
//! started after the batch was written covers it. Syncs are group-committed: one sync at a time,
//! and a sync covers every batch appended before it started, so concurrent appends share it.
//! `IntervalMs` and `Never` acknowledge once the batch is in the tail (a crash may lose the
//! unsynced window, never half a batch). Segment roll and clean shutdown always sync.
//!
//! Invariants:
//! 1. `log_start_offset <= log_end_offset`; `durable_end_offset <= log_end_offset`.
//! 2. Offsets are contiguous across batches; segment base offsets are the first batch's offset.
//! 3. Disk bytes before `tail.start` of the active segment, and all of every sealed segment, are
//!    written; reads of the active segment past `tail.written_end` first write the tail out.
//! 4. Only one task writes at a time (`write_lock`), and only one fdatasync runs at a time
//!    (`sync_lock`, always taken before `write_lock`).
//!
//! Runs on: the shard that owns the partition (single-threaded; `RefCell` borrows never span an
//! `.await`).

use crate::cache::{BatchCache, CacheKey};
use crate::checkpoint::{self, EpochEntry};
use crate::config::{FlushPolicy, LogConfig};
use crate::error::{Result, StorageError};
use crate::io::{self, align_down, align_up, IoBuffer, Storage, StorageFile};
use crate::producer_state::{self, ProducerBatch, ProducerStates, Verdict};
use crate::segment::{self, Segment};
use bytes::{Bytes, BytesMut};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use wire::{Compression, RecordBatchHeader};

/// The active segment's file is preallocated (fallocate, KEEP_SIZE) at least this far ahead of
/// its end (and as far ahead as it is long), so appends do not allocate extents one write at a
/// time, while an idle partition costs at most this much unused disk.
pub const PREALLOCATE_AHEAD_BYTES: u64 = 8 << 20;
/// Chunk writes allowed in flight per partition before an append waits for the oldest.
pub const WRITE_WINDOW: usize = 4;
/// Producer-state snapshots kept per partition (the newest ones).
pub const PRODUCER_SNAPSHOTS_KEPT: usize = 2;
/// Read size while replaying the log after a producer snapshot.
const PRODUCER_REPLAY_READ_BYTES: usize = 1 << 20;
/// Smallest read issued for the disk read path.
pub const DISK_READ_BYTES_MIN: usize = 64 << 10;

/// What an append assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub log_start_offset: i64,
    /// An idempotent producer's retry of a batch already in the log: these are the original
    /// offsets and nothing was written.
    pub duplicate: bool,
}

/// Where `open` took the producer state from (see `producer_state`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProducerRecovery {
    /// The snapshot loaded, if any (its offset).
    pub snapshot_offset: Option<i64>,
    /// Batches read from the log after it.
    pub batches_replayed: usize,
}

/// Batches read from the log: whole batches, contiguous in offsets.
#[derive(Debug, Clone, Default)]
pub struct LogRead {
    pub batches: Vec<Bytes>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// Whether the data came from the shard's batch cache rather than the disk.
    pub from_cache: bool,
}

impl LogRead {
    pub fn size_bytes(&self) -> usize {
        self.batches.iter().map(Bytes::len).sum()
    }
}

/// The answer to a lookup by timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampLookup {
    pub offset: i64,
    pub timestamp: i64,
}

/// The active segment's last, partly filled chunk.
pub(crate) struct Tail<B> {
    /// File position of `buffer[0]`; page-aligned.
    pub(crate) start: u64,
    /// The chunk being filled; `None` until a byte lands in it.
    pub(crate) buffer: Option<B>,
    /// Bytes of `buffer` that hold data: the segment's logical end is `start + len`.
    pub(crate) len: usize,
    /// File bytes before this position are on disk (their writes completed).
    pub(crate) written_end: u64,
}

impl<B> Tail<B> {
    pub(crate) fn empty() -> Self {
        Self { start: 0, buffer: None, len: 0, written_end: 0 }
    }
}

/// A chunk write that was submitted; `future` is `None` once it completed.
pub(crate) struct InflightWrite {
    end: u64,
    future: Option<std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>>>>>,
}

pub(crate) struct LogState<F: StorageFile> {
    pub(crate) segments: BTreeMap<i64, Segment<F>>,
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: i64,
    pub(crate) durable_end_offset: i64,
    pub(crate) epochs: Vec<EpochEntry>,
    pub(crate) tail: Tail<F::Buffer>,
    pub(crate) offline: bool,
    pub(crate) closed: bool,
    pub(crate) last_sync_ms: i64,
}

/// One partition's log. See the module header for the write path and durability rule.
pub struct PartitionLog<S: Storage> {
    pub(crate) storage: S,
    pub(crate) dir: PathBuf,
    pub(crate) config: RefCell<LogConfig>,
    pub(crate) state: RefCell<LogState<S::File>>,
    pub(crate) cache: Rc<RefCell<BatchCache>>,
    pub(crate) cache_key: CacheKey,
    pub(crate) write_lock: async_lock::Mutex<()>,
    pub(crate) sync_lock: async_lock::Mutex<()>,
    /// Submitted chunk writes of the active segment, oldest first (touched under `write_lock`).
    pub(crate) inflight: RefCell<std::collections::VecDeque<InflightWrite>>,
    /// fdatasync calls issued by group commit (for metrics and the group-commit test).
    pub(crate) syncs_completed: std::cell::Cell<u64>,
    /// Duration of those fdatasyncs, in microseconds (shared by the shard's partitions: one
    /// histogram is ~180 KB, too much per partition at 10,000 partitions).
    pub(crate) sync_latency_us: Rc<RefCell<hdrhistogram::Histogram<u64>>>,
    /// Whether `open` found a clean-shutdown marker and skipped the recovery scan.
    pub opened_clean: bool,
    /// Idempotent producers of this partition (touched under `write_lock` once open).
    pub(crate) producers: RefCell<crate::producer_state::ProducerStates>,
    pub(crate) producer_recovery: std::cell::Cell<ProducerRecovery>,
    /// The active segment's base offset when compaction last ran (see `compact_if_due`).
    pub(crate) compacted_sealed_end: std::cell::Cell<Option<i64>>,
    /// Changes to the files since open (appends, rolls, truncations, segment deletions, log
    /// start moves, compaction swaps). A log opened clean with none at close needs no rewrite.
    pub(crate) mutations: std::cell::Cell<u64>,
}

/// What `open` needs besides the storage.
pub struct OpenOptions {
    pub config: LogConfig,
    pub cache: Rc<RefCell<BatchCache>>,
    pub now_ms: i64,
    /// Where fdatasync durations are recorded (one per shard).
    pub sync_latency_us: Rc<RefCell<hdrhistogram::Histogram<u64>>>,
}

impl<S: Storage> PartitionLog<S> {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> LogConfig {
        self.config.borrow().clone()
    }

    pub fn set_config(&self, config: LogConfig) -> Result<()> {
        config.validate().map_err(StorageError::InvalidArgument)?;
        *self.config.borrow_mut() = config;
        Ok(())
    }

    pub fn log_start_offset(&self) -> i64 {
        self.state.borrow().log_start_offset
    }

    pub fn log_end_offset(&self) -> i64 {
        self.state.borrow().log_end_offset
    }

    /// Offsets below this are durable (synced).
    pub fn durable_end_offset(&self) -> i64 {
        self.state.borrow().durable_end_offset
    }

    /// How many group-commit fdatasyncs have completed since open.
    pub fn syncs_completed(&self) -> u64 {
        self.syncs_completed.get()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.state.borrow().epochs.last().map(|entry| entry.epoch)
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.state.borrow().segments.keys().copied().collect()
    }

    /// Total logical bytes across segments.
    pub fn size_bytes(&self) -> u64 {
        self.state.borrow().segments.values().map(|segment| segment.size_bytes).sum()
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        let state = self.state.borrow();
        if state.closed {
            return Err(StorageError::Closed(self.dir.clone()));
        }
        if state.offline {
            return Err(StorageError::Offline(self.dir.clone()));
        }
        Ok(())
    }

    /// Marks the log offline when an I/O step of a write fails, so a half-done write is never
    /// built upon; reopening runs recovery.
    pub(crate) fn offline_on_error<T>(&self, result: Result<T>) -> Result<T> {
        if result.is_err() {
            self.state.borrow_mut().offline = true;
        }
        result
    }

    /// Appends one client batch (exactly one v2 batch in `batch`), stamping `leader_epoch`;
    /// returns once the batch is durable if the flush policy is `Always`.
    pub async fn append(
        &self,
        batch: BytesMut,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let sync = self.config.borrow().flush == FlushPolicy::Always;
        self.append_with(batch, leader_epoch, now_ms, sync).await
    }

    /// Appends one client batch; with `sync`, returns only once it is durable (group-committed).
    /// Kafka's acks=all maps to `sync` under the `Always` policy, acks=1 to no sync.
    pub async fn append_with(
        &self,
        batch: BytesMut,
        leader_epoch: i32,
        now_ms: i64,
        sync: bool,
    ) -> Result<AppendInfo> {
        self.append_inner(batch, leader_epoch, now_ms, sync, true).await
    }

    /// `append_with` for a batch whose CRC32C the caller has just verified (the broker checks
    /// every batch of a request before appending any), so the CRC is not computed twice on the
    /// produce path. Framing, size and codec are still checked here.
    pub async fn append_crc_verified(
        &self,
        batch: BytesMut,
        leader_epoch: i32,
        now_ms: i64,
        sync: bool,
    ) -> Result<AppendInfo> {
        self.append_inner(batch, leader_epoch, now_ms, sync, false).await
    }

    async fn append_inner(
        &self,
        mut batch: BytesMut,
        leader_epoch: i32,
        now_ms: i64,
        sync: bool,
        verify_crc: bool,
    ) -> Result<AppendInfo> {
        let max_message_bytes = self.config.borrow().max_message_bytes;
        let producer_batch = {
            let header = RecordBatchHeader::parse(&batch, crate::config::BATCH_BYTES_MAX)?;
            if header.size_bytes() != batch.len() {
                return Err(StorageError::InvalidBatch(wire::DecodeError::BadBatchLength {
                    batch_length: batch.len() as i64 - 12,
                    batch_bytes_max: crate::config::BATCH_BYTES_MAX,
                }));
            }
            if header.size_bytes() > max_message_bytes {
                return Err(StorageError::BatchTooLarge {
                    size_bytes: header.size_bytes(),
                    max_message_bytes,
                });
            }
            if verify_crc {
                header.verify_crc()?;
            }
            if let Compression::Unknown(codec) = header.compression() {
                return Err(StorageError::UnknownCompression(codec));
            }
            ProducerBatch::of(&header)
        };
        let guard = self.write_lock.lock().await;
        self.check_writable()?;
        if let Some(producer_batch) = &producer_batch {
            let verdict = self.producers.borrow().check(producer_batch)?;
            if let Verdict::Duplicate(original) = verdict {
                drop(guard);
                if sync {
                    self.sync_to(original.last_offset + 1).await?;
                }
                return Ok(AppendInfo {
                    base_offset: original.base_offset,
                    last_offset: original.last_offset,
                    log_start_offset: self.log_start_offset(),
                    duplicate: true,
                });
            }
        }
        let result = self.append_locked(&mut batch, leader_epoch, now_ms).await;
        let info = self.offline_on_error(result)?;
        if let Some(producer_batch) = &producer_batch {
            self.producers.borrow_mut().record(producer_batch, info.base_offset, info.last_offset);
        }
        drop(guard);
        if sync {
            self.sync_to(info.last_offset + 1).await?;
        }
        Ok(info)
    }

    async fn append_locked(
        &self,
        batch: &mut BytesMut,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        self.mutations.set(self.mutations.get() + 1);
        self.record_epoch_locked(leader_epoch).await?;
        let (needs_roll, base_offset) = {
            let state = self.state.borrow();
            let config = self.config.borrow();
            let active = state.segments.values().next_back().expect("a log has an active segment");
            let too_big = active.size_bytes + batch.len() as u64 > config.segment_bytes;
            let too_old = now_ms - active.created_ms >= config.segment_ms as i64;
            let too_many_offsets = state.log_end_offset - active.base_offset > i64::from(i32::MAX);
            (
                active.size_bytes > 0 && (too_big || too_old || too_many_offsets),
                state.log_end_offset,
            )
        };
        if needs_roll {
            self.roll_locked(now_ms).await?;
        }
        let mut view =
            wire::record_batch::RecordBatchMut::new(batch, crate::config::BATCH_BYTES_MAX)?;
        view.set_base_offset(base_offset);
        view.set_partition_leader_epoch(leader_epoch);
        let bytes = std::mem::take(batch).freeze();
        let header = RecordBatchHeader::parse(&bytes, crate::config::BATCH_BYTES_MAX)?;
        let last_offset = header.last_offset();
        let (file, full_chunks) = {
            let mut state = self.state.borrow_mut();
            let interval = self.config.borrow().index_interval_bytes;
            let state = &mut *state;
            let active = state.segments.values_mut().next_back().expect("active segment");
            let position = active.size_bytes;
            active.note_batch(&header, position, interval);
            let file = active.file.clone();
            assert_eq!(state.tail.start + state.tail.len as u64, position);
            let chunk_bytes = self.config.borrow().write_chunk_bytes;
            let full_chunks = copy_into_tail(&mut state.tail, &*file, &bytes, chunk_bytes);
            state.log_end_offset = last_offset + 1;
            (file, full_chunks)
        };
        self.cache.borrow_mut().insert(self.cache_key, base_offset, last_offset, bytes);
        self.preallocate_ahead_locked(&file).await?;
        for (position, buffer) in full_chunks {
            self.submit_write_locked(&file, position, buffer).await?;
        }
        self.complete_writes_locked(WRITE_WINDOW).await?;
        Ok(AppendInfo {
            base_offset,
            last_offset,
            log_start_offset: self.log_start_offset(),
            duplicate: false,
        })
    }

    /// Adds `leader_epoch` to the epoch history (durably, before any batch carries it).
    async fn record_epoch_locked(&self, leader_epoch: i32) -> Result<()> {
        let (latest, log_end) = {
            let state = self.state.borrow();
            (state.epochs.last().map(|entry| entry.epoch), state.log_end_offset)
        };
        match latest {
            Some(latest) if leader_epoch < latest => {
                Err(StorageError::StaleLeaderEpoch { epoch: leader_epoch, latest_epoch: latest })
            }
            Some(latest) if leader_epoch == latest => Ok(()),
            _ => {
                let mut epochs = self.state.borrow().epochs.clone();
                epochs.push(EpochEntry { epoch: leader_epoch, start_offset: log_end });
                let path = checkpoint::path_in(&self.dir, checkpoint::LEADER_EPOCH_FILE);
                io::write_file_atomic(&self.storage, &path, &checkpoint::encode_epochs(&epochs))
                    .await?;
                self.state.borrow_mut().epochs = epochs;
                Ok(())
            }
        }
    }

    /// Extends the active segment's preallocation when its end comes within a chunk of it.
    async fn preallocate_ahead_locked(&self, file: &Rc<S::File>) -> Result<()> {
        let (target, current) = {
            let state = self.state.borrow();
            let config = self.config.borrow();
            let active = state.segments.values().next_back().expect("active segment");
            let wanted_end = active.size_bytes + config.write_chunk_bytes as u64;
            if wanted_end <= active.preallocated_end
                || active.preallocated_end >= config.segment_bytes
            {
                return Ok(());
            }
            // Reserve ahead by as much as the segment already holds (at least 8 MiB): an idle
            // partition costs 8 MiB of disk, a busy one gets few, large extents.
            let ahead = PREALLOCATE_AHEAD_BYTES.max(active.size_bytes);
            let target = align_up(active.size_bytes + ahead).min(align_up(config.segment_bytes));
            (target, active.preallocated_end)
        };
        if target > current {
            file.preallocate(target).await?;
            let mut state = self.state.borrow_mut();
            let active = state.segments.values_mut().next_back().expect("active segment");
            active.preallocated_end = target;
        }
        Ok(())
    }

    /// Submits one full chunk write and keeps it in flight (write-behind). Caller holds
    /// `write_lock`.
    async fn submit_write_locked(
        &self,
        file: &Rc<S::File>,
        position: u64,
        buffer: <S::File as StorageFile>::Buffer,
    ) -> Result<()> {
        let end = position + buffer.as_slice().len() as u64;
        let file = file.clone();
        let mut future: std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>>>> =
            Box::pin(async move { file.write_at(buffer, position).await });
        // Polling once submits the write; it completes while this task goes on.
        let future = match futures_lite::future::poll_once(&mut future).await {
            Some(result) => {
                result?;
                None
            }
            None => Some(future),
        };
        let queued = future.is_some();
        self.inflight.borrow_mut().push_back(InflightWrite { end, future });
        if queued {
            self.storage.submit_queued_io().await;
        }
        Ok(())
    }

    /// Waits for the oldest in-flight writes until at most `keep` remain, advancing
    /// `written_end` in order. Caller holds `write_lock`.
    async fn complete_writes_locked(&self, keep: usize) -> Result<()> {
        loop {
            let next = {
                let mut inflight = self.inflight.borrow_mut();
                if inflight.len() <= keep {
                    return Ok(());
                }
                inflight.pop_front().expect("non-empty")
            };
            if let Some(future) = next.future {
                future.await?;
            }
            let mut state = self.state.borrow_mut();
            state.tail.written_end = state.tail.written_end.max(next.end);
        }
    }

    /// Writes everything appended to the active segment: waits for in-flight chunk writes, then
    /// writes the partial last chunk from its first unwritten page, zero-padded to a page.
    /// Caller holds `write_lock`.
    async fn write_out_locked(&self) -> Result<()> {
        self.complete_writes_locked(0).await?;
        let (file, position, buffer, end) = {
            let state = self.state.borrow();
            let tail = &state.tail;
            let end = tail.start + tail.len as u64;
            if tail.written_end >= end {
                return Ok(());
            }
            let Some(source) = tail.buffer.as_ref() else { return Ok(()) };
            let from = align_down(tail.written_end.max(tail.start));
            let to = align_up(end);
            let active = state.segments.values().next_back().expect("active segment");
            let file = active.file.clone();
            let mut buffer = file.alloc_buffer((to - from) as usize);
            let data_from = (from - tail.start) as usize;
            let data_len = (end - from) as usize;
            let target = buffer.as_mut_slice();
            if let (Some(dst), Some(src)) =
                (target.get_mut(..data_len), source.as_slice().get(data_from..data_from + data_len))
            {
                dst.copy_from_slice(src);
            }
            if let Some(padding) = target.get_mut(data_len..) {
                padding.fill(0);
            }
            (file, from, buffer, end)
        };
        file.write_at(buffer, position).await?;
        self.state.borrow_mut().tail.written_end = end;
        Ok(())
    }

    /// Makes every offset below `target` durable (group commit; see the module header).
    pub async fn sync_to(&self, target: i64) -> Result<()> {
        loop {
            if self.state.borrow().durable_end_offset >= target {
                return Ok(());
            }
            let _sync = self.sync_lock.lock().await;
            if self.state.borrow().durable_end_offset >= target {
                return Ok(());
            }
            let (file, end) = {
                let _write = self.write_lock.lock().await;
                self.check_writable()?;
                let result = self.write_out_locked().await;
                self.offline_on_error(result)?;
                let state = self.state.borrow();
                let active = state.segments.values().next_back().expect("active segment");
                (active.file.clone(), state.log_end_offset)
            };
            let sync_started = std::time::Instant::now();
            let synced = file.sync().await.map_err(StorageError::from);
            self.offline_on_error(synced)?;
            self.syncs_completed.set(self.syncs_completed.get() + 1);
            self.sync_latency_us
                .borrow_mut()
                .saturating_record(sync_started.elapsed().as_micros().max(1) as u64);
            let mut state = self.state.borrow_mut();
            state.durable_end_offset = state.durable_end_offset.max(end.min(state.log_end_offset));
        }
    }

    /// Syncs everything appended so far.
    pub async fn sync(&self) -> Result<()> {
        let end = self.log_end_offset();
        self.sync_to(end).await
    }

    /// For `FlushPolicy::IntervalMs`: syncs when the interval has passed since the last sync.
    pub async fn flush_if_due(&self, now_ms: i64) -> Result<()> {
        let due = match self.config.borrow().flush {
            FlushPolicy::IntervalMs(interval) => {
                let state = self.state.borrow();
                state.durable_end_offset < state.log_end_offset
                    && now_ms - state.last_sync_ms >= interval as i64
            }
            _ => false,
        };
        if due {
            self.sync().await?;
            self.state.borrow_mut().last_sync_ms = now_ms;
        }
        Ok(())
    }

    /// Seals the active segment and starts a new one at the log end offset.
    pub async fn roll(&self, now_ms: i64) -> Result<()> {
        let _write = self.write_lock.lock().await;
        self.check_writable()?;
        let result = self.roll_locked(now_ms).await;
        self.offline_on_error(result)
    }

    async fn roll_locked(&self, now_ms: i64) -> Result<()> {
        self.mutations.set(self.mutations.get() + 1);
        let is_empty = {
            let state = self.state.borrow();
            let active = state.segments.values().next_back().expect("active segment");
            active.size_bytes == 0
        };
        if is_empty {
            return Ok(());
        }
        self.seal_active_locked().await?;
        let base_offset = self.log_end_offset();
        let path = self.dir.join(segment::log_file_name(base_offset));
        let file = self.storage.open(&path, true).await?;
        file.truncate(0).await?;
        self.storage.sync_dir(&self.dir).await?;
        {
            let mut state = self.state.borrow_mut();
            state
                .segments
                .insert(base_offset, new_segment(base_offset, Rc::new(file), path, now_ms));
            state.tail = Tail::empty();
            state.durable_end_offset = state.log_end_offset;
        }
        self.write_producer_snapshot_locked().await
    }

    /// Writes the producer state as of the log end (`<log end>.snapshot`) and keeps only the
    /// newest `PRODUCER_SNAPSHOTS_KEPT`. Caller holds `write_lock`, so every batch below the
    /// log end is in the state.
    async fn write_producer_snapshot_locked(&self) -> Result<()> {
        let log_end = self.log_end_offset();
        let existing = self.producer_snapshot_offsets().await?;
        let empty_log = self.log_start_offset() == log_end && self.producers.borrow().is_empty();
        if existing.last() == Some(&log_end) || (existing.is_empty() && empty_log) {
            // Nothing appended since the newest snapshot (or nothing to replay at all).
            return Ok(());
        }
        let bytes = self.producers.borrow().encode(log_end);
        let path = self.dir.join(producer_state::snapshot_file_name(log_end));
        io::write_file_atomic(&self.storage, &path, &bytes).await?;
        let offsets = self.producer_snapshot_offsets().await?;
        let keep_from = offsets.len().saturating_sub(PRODUCER_SNAPSHOTS_KEPT);
        for offset in offsets.iter().take(keep_from) {
            self.storage
                .remove(&self.dir.join(producer_state::snapshot_file_name(*offset)))
                .await?;
        }
        Ok(())
    }

    /// Offsets of the producer snapshots in the partition directory, ascending.
    async fn producer_snapshot_offsets(&self) -> Result<Vec<i64>> {
        let mut offsets: Vec<i64> = self
            .storage
            .list_dir(&self.dir)
            .await?
            .iter()
            .filter_map(|name| producer_state::parse_snapshot_file_name(name))
            .collect();
        offsets.sort_unstable();
        Ok(offsets)
    }

    /// Rebuilds the producer state: the newest readable snapshot at or below the log end, then
    /// the batches after it (snapshots above the log end, left by a truncation, are removed).
    pub(crate) async fn load_producer_state(&self, now_ms: i64) -> Result<()> {
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        let offsets = self.producer_snapshot_offsets().await?;
        let mut loaded: Option<(i64, ProducerStates)> = None;
        for offset in offsets.iter().rev() {
            let path = self.dir.join(producer_state::snapshot_file_name(*offset));
            if *offset > log_end {
                self.storage.remove(&path).await?;
                continue;
            }
            if loaded.is_some() {
                continue;
            }
            match io::read_whole_file(&self.storage, &path)
                .await?
                .as_deref()
                .and_then(ProducerStates::decode)
            {
                Some((stored_offset, states)) if stored_offset == *offset => {
                    loaded = Some((*offset, states))
                }
                _ => tracing::warn!(path = %path.display(), "unreadable producer snapshot skipped"),
            }
        }
        let (snapshot_offset, mut states) = match loaded {
            Some((offset, states)) => (Some(offset), states),
            None => (None, ProducerStates::default()),
        };
        let mut offset = snapshot_offset.unwrap_or(log_start).max(log_start);
        let mut batches_replayed = 0;
        while offset < log_end {
            let read = self.read(offset, PRODUCER_REPLAY_READ_BYTES).await?;
            if read.batches.is_empty() {
                break;
            }
            for bytes in &read.batches {
                let header = RecordBatchHeader::parse(bytes, crate::config::BATCH_BYTES_MAX)?;
                if let Some(batch) = ProducerBatch::of(&header) {
                    states.record(&batch, header.base_offset(), header.last_offset());
                }
                batches_replayed += 1;
                offset = header.last_offset() + 1;
            }
        }
        states.expire(log_start, now_ms, producer_state::PRODUCER_ID_EXPIRATION_MS_DEFAULT);
        *self.producers.borrow_mut() = states;
        self.producer_recovery.set(ProducerRecovery { snapshot_offset, batches_replayed });
        Ok(())
    }

    /// Where the last open (or truncation) took the producer state from.
    pub fn producer_recovery(&self) -> ProducerRecovery {
        self.producer_recovery.get()
    }

    /// Idempotent producers this partition tracks.
    pub fn producer_count(&self) -> usize {
        self.producers.borrow().len()
    }

    /// (producer id, epoch, last sequence, last timestamp) of the producers this partition
    /// tracks (DescribeProducers).
    pub fn active_producers(&self) -> Vec<(i64, i16, i32, i64)> {
        self.producers.borrow().active()
    }

    /// Writes the active segment out completely, trims the file to its logical size, syncs it,
    /// and writes its index files. Caller holds `write_lock`.
    async fn seal_active_locked(&self) -> Result<()> {
        self.write_out_locked().await?;
        let (file, size, base_offset, index, time_index) = {
            let mut state = self.state.borrow_mut();
            let active = state.segments.values_mut().next_back().expect("active segment");
            active.seal_time_index();
            (
                active.file.clone(),
                active.size_bytes,
                active.base_offset,
                active.index.encode(),
                active.time_index.encode(),
            )
        };
        file.truncate(size).await?;
        file.sync().await?;
        let index_path = self.dir.join(segment::index_file_name(base_offset));
        io::write_file_atomic(&self.storage, &index_path, &index).await?;
        let time_index_path = self.dir.join(segment::time_index_file_name(base_offset));
        io::write_file_atomic(&self.storage, &time_index_path, &time_index).await?;
        Ok(())
    }

    /// Reads whole batches starting with the one holding `offset`, up to `max_bytes` (at least
    /// one batch, so a reader always makes progress).
    pub async fn read(&self, offset: i64, max_bytes: usize) -> Result<LogRead> {
        let (log_start, log_end) = {
            let state = self.state.borrow();
            if state.closed {
                return Err(StorageError::Closed(self.dir.clone()));
            }
            (state.log_start_offset, state.log_end_offset)
        };
        if offset < log_start || offset > log_end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: log_start,
                log_end_offset: log_end,
            });
        }
        let mut read =
            LogRead { log_start_offset: log_start, log_end_offset: log_end, ..LogRead::default() };
        if offset == log_end {
            return Ok(read);
        }
        if let Some(batches) = self.cache.borrow().read(self.cache_key, offset, max_bytes) {
            read.batches = batches;
            read.from_cache = true;
            return Ok(read);
        }
        read.batches = self.read_from_disk(offset, max_bytes).await?;
        Ok(read)
    }

    async fn read_from_disk(&self, offset: i64, max_bytes: usize) -> Result<Vec<Bytes>> {
        let needs_write_out = {
            let state = self.state.borrow();
            let (&active_base, active) = state.segments.iter().next_back().expect("active segment");
            offset >= active_base && state.tail.written_end < active.size_bytes
        };
        if needs_write_out {
            let _write = self.write_lock.lock().await;
            self.check_writable()?;
            let result = self.write_out_locked().await;
            self.offline_on_error(result)?;
        }
        let (file, path, base_offset, start_position, end_position) = {
            let state = self.state.borrow();
            let Some((_, segment)) = state
                .segments
                .range(..=offset)
                .next_back()
                .filter(|(_, segment)| offset < segment.next_offset)
            else {
                return Ok(Vec::new());
            };
            let (_, position) = segment.index.lookup(segment.relative(offset));
            (
                segment.file.clone(),
                segment.path.clone(),
                segment.base_offset,
                u64::from(position),
                segment.size_bytes,
            )
        };
        let corrupt = |reason: String| StorageError::Corrupt { path: path.clone(), reason };
        let batch_bytes_max = crate::config::BATCH_BYTES_MAX;
        let mut batches = Vec::new();
        let mut total = 0usize;
        let mut position = start_position;
        let mut expected_base: Option<i64> = None;
        // The next read must hold at least this much (a batch larger than the last read).
        let mut read_at_least = DISK_READ_BYTES_MIN;
        while position < end_position {
            let want = (max_bytes.saturating_sub(total)).max(read_at_least);
            read_at_least = DISK_READ_BYTES_MIN;
            let read_len = (end_position - position).min(want as u64) as usize;
            let read = file.read_at(position, read_len).await?;
            let chunk = Bytes::copy_from_slice(read.as_ref());
            if chunk.len() < read_len {
                return Err(corrupt(format!(
                    "short read at {position}: {} of {read_len}",
                    chunk.len()
                )));
            }
            let mut at = 0usize;
            while at < chunk.len() {
                let rest = chunk.slice(at..);
                let size = match wire::record_batch::batch_size_from_prefix(&rest, batch_bytes_max)
                {
                    Ok(size) => size,
                    Err(wire::DecodeError::Truncated { .. }) => break,
                    Err(error) => {
                        return Err(corrupt(format!(
                            "at position {}: {error}",
                            position + at as u64
                        )))
                    }
                };
                if size > rest.len() {
                    if !batches.is_empty() && total + size > max_bytes {
                        return Ok(batches);
                    }
                    // Read again from this batch, whole.
                    read_at_least = size;
                    break;
                }
                let batch = rest.slice(..size);
                let header = RecordBatchHeader::parse(&batch, batch_bytes_max)
                    .map_err(|error| corrupt(error.to_string()))?;
                check_base(&header, expected_base, &corrupt)?;
                if header.base_offset() < base_offset {
                    return Err(corrupt(format!(
                        "batch offset {} below segment base",
                        header.base_offset()
                    )));
                }
                expected_base = Some(header.last_offset() + 1);
                at += size;
                if header.last_offset() < offset {
                    continue;
                }
                if !batches.is_empty() && total + size > max_bytes {
                    return Ok(batches);
                }
                total += size;
                batches.push(batch);
                if total >= max_bytes {
                    return Ok(batches);
                }
            }
            if at == 0
                && (read_at_least <= read_len || read_at_least as u64 > end_position - position)
            {
                return Err(corrupt(format!("no whole batch at position {position}")));
            }
            position += at as u64;
        }
        Ok(batches)
    }

    /// The first offset whose record timestamp is `>= timestamp` (Kafka ListOffsets by time),
    /// located through the time index. For compressed batches the answer is the batch's first
    /// offset (record timestamps inside are not decoded here).
    pub async fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<TimestampLookup>> {
        let candidates: Vec<(i64, i64)> = {
            let state = self.state.borrow();
            state
                .segments
                .values()
                .filter(|segment| segment.max_timestamp >= timestamp)
                .map(|segment| {
                    let relative = segment.time_index.scan_start(timestamp);
                    (segment.base_offset, segment.base_offset + i64::from(relative))
                })
                .collect()
        };
        let log_start = self.log_start_offset();
        for (_, scan_from) in candidates {
            let mut offset = scan_from.max(log_start);
            loop {
                let read = match self.read(offset, DISK_READ_BYTES_MIN).await {
                    Ok(read) => read,
                    Err(StorageError::OffsetOutOfRange { .. }) => break,
                    Err(error) => return Err(error),
                };
                if read.batches.is_empty() {
                    break;
                }
                for batch in &read.batches {
                    let header = RecordBatchHeader::parse(batch, crate::config::BATCH_BYTES_MAX)?;
                    offset = header.last_offset() + 1;
                    if header.max_timestamp() < timestamp || header.last_offset() < log_start {
                        continue;
                    }
                    for record in wire::compression::records_of(&header)? {
                        let record_timestamp = header.base_timestamp() + record.timestamp_delta;
                        let record_offset = header.base_offset() + i64::from(record.offset_delta);
                        if record_timestamp >= timestamp && record_offset >= log_start {
                            return Ok(Some(TimestampLookup {
                                offset: record_offset,
                                timestamp: record_timestamp,
                            }));
                        }
                    }
                    return Ok(Some(TimestampLookup {
                        offset: header.base_offset().max(log_start),
                        timestamp: header.max_timestamp(),
                    }));
                }
            }
        }
        Ok(None)
    }

    /// Removes every batch holding an offset `>= offset` (whole batches: the log end becomes the
    /// base offset of the first removed batch). For replication's log reconciliation.
    pub async fn truncate_to(&self, offset: i64) -> Result<()> {
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        {
            let _write = self.write_lock.lock().await;
            self.check_writable()?;
            let result = self.truncate_locked(offset).await;
            self.offline_on_error(result)?;
        }
        // Batches above the cut are gone: rebuild the producer state from the snapshots left
        // (those above the cut are removed) and the log. Truncation happens on logs no client
        // appends to (recovery, a follower catching up), so the write lock is not held for it.
        // If that fails the log goes offline: its producer state is unknown until reopened.
        let result = self.load_producer_state(crate::runtime::now_ms()).await;
        self.offline_on_error(result)
    }

    async fn truncate_locked(&self, offset: i64) -> Result<()> {
        self.mutations.set(self.mutations.get() + 1);
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        self.write_out_locked().await?;
        let first_base = *self.state.borrow().segments.keys().next().expect("segments");
        // Every read happens before anything is deleted, so a read error leaves the log as it was.
        let cut = if offset > first_base {
            let (file, path, base) = {
                let state = self.state.borrow();
                let (_, holder) =
                    state.segments.range(..offset).next_back().expect("a segment below offset");
                (holder.file.clone(), holder.path.clone(), holder.base_offset)
            };
            let position = self.position_of_batch_holding(&file, &path, base, offset).await?;
            Some((file, path, base, position))
        } else {
            None
        };
        // Remove whole segments from the newest backwards, so a crash leaves a prefix.
        let doomed: Vec<i64> = {
            let state = self.state.borrow();
            state
                .segments
                .range(offset.max(first_base + 1)..)
                .map(|(base, _)| *base)
                .rev()
                .collect()
        };
        for base in doomed {
            self.delete_segment_locked(base).await?;
        }
        match cut {
            None => {
                // Everything goes: the log restarts empty at `offset`.
                self.delete_segment_locked(first_base).await?;
                let path = self.dir.join(segment::log_file_name(offset));
                let file = self.storage.open(&path, true).await?;
                file.truncate(0).await?;
                self.storage.sync_dir(&self.dir).await?;
                let mut state = self.state.borrow_mut();
                state.segments.insert(offset, new_segment(offset, Rc::new(file), path, 0));
                state.log_start_offset = offset;
                state.log_end_offset = offset;
            }
            Some((file, path, base, position)) => {
                // Cut the (now last) segment at the first batch holding `offset`, then rebuild
                // its indexes from what is left.
                let epochs = self.state.borrow().epochs.clone();
                let interval = self.config.borrow().index_interval_bytes;
                file.truncate(position).await?;
                file.sync().await?;
                for name in [segment::index_file_name(base), segment::time_index_file_name(base)] {
                    let stale = self.dir.join(name);
                    if self.storage.exists(&stale).await? {
                        self.storage.remove(&stale).await?;
                    }
                }
                let scan = segment::scan_segment(&*file, &path, base, interval, &epochs).await?;
                if let Some(reason) = &scan.stopped_early {
                    return Err(StorageError::Corrupt { path, reason: reason.clone() });
                }
                let mut state = self.state.borrow_mut();
                let segment = state.segments.values_mut().next_back().expect("segment");
                apply_scan(segment, scan);
                state.log_end_offset = segment.next_offset;
                state.log_start_offset = state.log_start_offset.min(state.log_end_offset);
            }
        }
        self.reload_tail_locked().await?;
        let log_end = self.log_end_offset();
        let epochs_changed = {
            let mut state = self.state.borrow_mut();
            state.durable_end_offset = state.durable_end_offset.min(log_end);
            let before = state.epochs.len();
            state.epochs.retain(|entry| entry.start_offset < log_end);
            before != state.epochs.len()
        };
        if epochs_changed {
            let epochs = self.state.borrow().epochs.clone();
            let path = checkpoint::path_in(&self.dir, checkpoint::LEADER_EPOCH_FILE);
            io::write_file_atomic(&self.storage, &path, &checkpoint::encode_epochs(&epochs))
                .await?;
        }
        self.persist_log_start_locked().await?;
        self.cache.borrow_mut().truncate(self.cache_key, log_end);
        Ok(())
    }

    async fn position_of_batch_holding(
        &self,
        file: &S::File,
        path: &Path,
        base: i64,
        offset: i64,
    ) -> Result<u64> {
        let (start, size) = {
            let state = self.state.borrow();
            let segment = state.segments.get(&base).expect("segment");
            let (_, position) = segment.index.lookup(segment.relative(offset.max(base)));
            (u64::from(position), segment.size_bytes)
        };
        let mut position = start;
        while position < size {
            let head = file.read_at(position, wire::BATCH_HEADER_BYTES).await?;
            let header =
                wire::record_batch::peek_batch(head.as_ref(), crate::config::BATCH_BYTES_MAX)
                    .map_err(|error| StorageError::Corrupt {
                        path: path.to_path_buf(),
                        reason: error.to_string(),
                    })?;
            if header.last_offset >= offset {
                return Ok(position);
            }
            position += header.size_bytes as u64;
        }
        Ok(size)
    }

    /// Re-reads the partial last page of the active segment into the tail (after truncation).
    async fn reload_tail_locked(&self) -> Result<()> {
        let (file, size) = {
            let state = self.state.borrow();
            let active = state.segments.values().next_back().expect("active segment");
            (active.file.clone(), active.size_bytes)
        };
        let chunk_bytes = self.config.borrow().write_chunk_bytes;
        let tail = load_tail(&*file, size, &self.dir, chunk_bytes).await?;
        self.state.borrow_mut().tail = tail;
        Ok(())
    }

    async fn delete_segment_locked(&self, base: i64) -> Result<()> {
        self.mutations.set(self.mutations.get() + 1);
        let segment = self.state.borrow_mut().segments.remove(&base);
        let Some(segment) = segment else { return Ok(()) };
        drop(segment);
        for name in [
            segment::log_file_name(base),
            segment::index_file_name(base),
            segment::time_index_file_name(base),
        ] {
            let path = self.dir.join(name);
            if self.storage.exists(&path).await? {
                self.storage.remove(&path).await?;
            }
        }
        self.storage.sync_dir(&self.dir).await?;
        Ok(())
    }

    async fn persist_log_start_locked(&self) -> Result<()> {
        self.mutations.set(self.mutations.get() + 1);
        let log_start = self.log_start_offset();
        let path = checkpoint::path_in(&self.dir, checkpoint::LOG_START_OFFSET_FILE);
        io::write_file_atomic(&self.storage, &path, &checkpoint::encode_pairs(&[(0, log_start)]))
            .await?;
        Ok(())
    }

    /// Moves the log start offset to `offset` (Kafka DeleteRecords) and deletes the segments
    /// wholly below it. Returns the new log start offset.
    pub async fn delete_records_before(&self, offset: i64) -> Result<i64> {
        let _write = self.write_lock.lock().await;
        self.check_writable()?;
        let (log_start, log_end) = {
            let state = self.state.borrow();
            (state.log_start_offset, state.log_end_offset)
        };
        if offset > log_end || offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: log_start,
                log_end_offset: log_end,
            });
        }
        if offset <= log_start {
            return Ok(log_start);
        }
        self.state.borrow_mut().log_start_offset = offset;
        let result = async {
            self.persist_log_start_locked().await?;
            self.delete_segments_below_start_locked().await
        }
        .await;
        self.offline_on_error(result)?;
        self.producers.borrow_mut().expire(offset, i64::MIN, i64::MAX);
        Ok(offset)
    }

    async fn delete_segments_below_start_locked(&self) -> Result<()> {
        loop {
            let doomed = {
                let state = self.state.borrow();
                let mut sealed = state.segments.values().rev().skip(1).collect::<Vec<_>>();
                sealed.reverse();
                sealed
                    .first()
                    .filter(|segment| segment.next_offset <= state.log_start_offset)
                    .map(|segment| segment.base_offset)
            };
            match doomed {
                Some(base) => self.delete_segment_locked(base).await?,
                None => return Ok(()),
            }
        }
    }

    /// Deletes whole sealed segments past `retention.ms` (by their largest timestamp) or beyond
    /// `retention.bytes`, oldest first, moving the log start offset. Returns how many it deleted.
    pub async fn apply_retention(&self, now_ms: i64) -> Result<usize> {
        let _write = self.write_lock.lock().await;
        self.check_writable()?;
        let mut deleted = 0;
        loop {
            let doomed = {
                let state = self.state.borrow();
                let config = self.config.borrow();
                if state.segments.len() < 2 {
                    None
                } else {
                    let total: u64 =
                        state.segments.values().map(|segment| segment.size_bytes).sum();
                    let oldest = state.segments.values().next().expect("segments");
                    let newest_time = if oldest.max_timestamp >= 0 {
                        oldest.max_timestamp
                    } else {
                        oldest.created_ms
                    };
                    let by_time =
                        config.retention_ms.is_some_and(|ms| now_ms - newest_time > ms as i64);
                    let by_size = config
                        .retention_bytes
                        .is_some_and(|bytes| total - oldest.size_bytes >= bytes);
                    // Only under cleanup.policy=delete (a compacted topic keeps its keys).
                    (config.cleanup_delete && (by_time || by_size)).then_some(oldest.base_offset)
                }
            };
            let Some(base) = doomed else { break };
            let next_base = {
                let mut state = self.state.borrow_mut();
                let next = state
                    .segments
                    .range(base + 1..)
                    .next()
                    .map(|(b, _)| *b)
                    .expect("a newer segment");
                state.log_start_offset = state.log_start_offset.max(next);
                next
            };
            let _ = next_base;
            let result = self.delete_segment_locked(base).await;
            self.offline_on_error(result)?;
            deleted += 1;
        }
        if deleted > 0 {
            let result = self.persist_log_start_locked().await;
            self.offline_on_error(result)?;
        }
        let log_start = self.log_start_offset();
        self.producers.borrow_mut().expire(
            log_start,
            now_ms,
            producer_state::PRODUCER_ID_EXPIRATION_MS_DEFAULT,
        );
        Ok(deleted)
    }

    /// Clean shutdown: writes and syncs everything, trims the active file, writes its indexes and
    /// the clean-shutdown marker, so the next open skips the recovery scan.
    pub async fn close(&self) -> Result<()> {
        let _sync = self.sync_lock.lock().await;
        let _write = self.write_lock.lock().await;
        if self.state.borrow().closed {
            return Ok(());
        }
        self.check_writable()?;
        // Untouched since a clean open: segments, indexes, snapshot and checkpoints on disk are
        // still exactly what that open trusted; only the marker (removed at open) is missing.
        let untouched = self.opened_clean && self.mutations.get() == 0;
        let result = async {
            if !untouched {
                self.seal_active_locked().await?;
                self.write_producer_snapshot_locked().await?;
                self.persist_log_start_locked().await?;
            }
            let marker = checkpoint::path_in(&self.dir, checkpoint::CLEAN_SHUTDOWN_FILE);
            let log_end = self.log_end_offset();
            io::write_file_atomic(&self.storage, &marker, format!("{log_end}\n").as_bytes())
                .await?;
            Ok(())
        }
        .await;
        self.offline_on_error(result)?;
        let segments = {
            let mut state = self.state.borrow_mut();
            state.closed = true;
            state.durable_end_offset = state.log_end_offset;
            std::mem::take(&mut state.segments)
        };
        self.cache.borrow_mut().forget(self.cache_key);
        for (_, segment) in segments {
            if let Ok(file) = Rc::try_unwrap(segment.file) {
                self.storage.close(file).await?;
            }
        }
        Ok(())
    }
}

fn check_base(
    header: &RecordBatchHeader<'_>,
    expected_base: Option<i64>,
    corrupt: &dyn Fn(String) -> StorageError,
) -> Result<()> {
    if let Some(expected) = expected_base {
        if header.base_offset() != expected {
            return Err(corrupt(format!(
                "batch base offset {} where {expected} was expected",
                header.base_offset()
            )));
        }
    }
    Ok(())
}

/// Builds the tail of an active segment of `size` bytes: its partial last page, read back.
pub(crate) async fn load_tail<F: StorageFile>(
    file: &F,
    size: u64,
    dir: &Path,
    chunk_bytes: usize,
) -> Result<Tail<F::Buffer>> {
    let start = align_down(size);
    let len = (size - start) as usize;
    let mut tail = Tail { start, buffer: None, len, written_end: size };
    if len > 0 {
        let read = file.read_at(start, len).await?;
        let bytes = read.as_ref();
        if bytes.len() != len {
            return Err(StorageError::Corrupt {
                path: dir.to_path_buf(),
                reason: "tail page short".into(),
            });
        }
        let mut buffer = file.alloc_buffer(chunk_bytes.max(io::align_up(len as u64) as usize));
        if let Some(prefix) = buffer.as_mut_slice().get_mut(..len) {
            prefix.copy_from_slice(bytes);
        }
        tail.buffer = Some(buffer);
    }
    Ok(tail)
}

/// Copies appended bytes into the tail's chunk buffers; returns the chunks that filled up, with
/// their file positions, for the caller to submit.
fn copy_into_tail<F: StorageFile>(
    tail: &mut Tail<F::Buffer>,
    file: &F,
    bytes: &[u8],
    chunk_bytes: usize,
) -> Vec<(u64, F::Buffer)> {
    let mut full = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let buffer = tail.buffer.get_or_insert_with(|| file.alloc_buffer(chunk_bytes));
        let capacity = buffer.as_slice().len();
        let room = capacity - tail.len;
        let take = room.min(rest.len());
        let (now, later) = rest.split_at(take);
        if let Some(target) = buffer.as_mut_slice().get_mut(tail.len..tail.len + take) {
            target.copy_from_slice(now);
        }
        tail.len += take;
        rest = later;
        if tail.len == capacity {
            if let Some(chunk) = tail.buffer.take() {
                full.push((tail.start, chunk));
            }
            tail.start += capacity as u64;
            tail.len = 0;
        }
    }
    full
}

/// A histogram for microsecond latencies from 1 us to one hour, 3 significant digits.
pub fn latency_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .expect("constant bounds are valid")
}

pub(crate) fn new_segment<F>(
    base_offset: i64,
    file: Rc<F>,
    path: PathBuf,
    now_ms: i64,
) -> Segment<F> {
    Segment {
        base_offset,
        file,
        path,
        size_bytes: 0,
        next_offset: base_offset,
        index: Default::default(),
        time_index: Default::default(),
        max_timestamp: -1,
        offset_of_max_timestamp: base_offset,
        bytes_since_index_entry: 0,
        created_ms: now_ms,
        preallocated_end: 0,
    }
}

pub(crate) fn apply_scan<F>(segment: &mut Segment<F>, scan: segment::ScanOutcome) {
    segment.size_bytes = scan.valid_bytes;
    segment.next_offset = scan.next_offset;
    segment.index = scan.index;
    segment.time_index = scan.time_index;
    segment.max_timestamp = scan.max_timestamp;
    segment.offset_of_max_timestamp = scan.offset_of_max_timestamp;
    segment.bytes_since_index_entry = scan.bytes_since_index_entry;
}
