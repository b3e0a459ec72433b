//! `PartitionLog`: one partition's append-only log of Kafka v2 record batches.
//!
//! Owns: the partition directory `<data_dir>/<topic>-<partition>/` and everything in it:
//! segments (`.log`, `.index`, `.timeindex`), the log start offset and leader-epoch
//! checkpoints, and the clean-shutdown marker.
//!
//! Write path: an append validates the batch (framing, magic, CRC32C, size), assigns offsets by
//! patching the base offset and partition leader epoch in place, and copies it into the active
//! segment's tail: an aligned `write_chunk_bytes` direct-I/O buffer (`LARGE_WRITE_CHUNK_BYTES`
//! while large batches arrive). A full chunk is submitted
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
//! Readers (consumers) stop at the high watermark: replication decides it, or on a log with
//! one replica it is the log end, short of any append held until durable
//! (`hold_until_durable`: a failed write cuts the log back to its durable end and refuses the
//! appends still waiting for their sync, so those must not have been read).
//!
//! Invariants:
//! 1. `log_start_offset <= high_watermark <= log_end_offset` and
//!    `log_start_offset <= durable_end_offset <= log_end_offset` (`LogState::check_offsets`,
//!    asserted wherever they move; the durable end reads as the log start when DeleteRecords
//!    moved the start past it).
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
pub(crate) use tail::Tail;
use wire::{CheckedBatch, CheckedBatchMut, Compression, RecordBatchHeader};

mod preallocation;
mod producer_snapshots;
mod read;
pub mod read_ahead;
mod retention;
mod roll;
mod sync;
pub(crate) mod tail;
mod transactions;
mod truncate;
mod write;

/// Sealed segments whose files a log keeps open (the most recently read); the active one is
/// always open.
pub const SEALED_FILES_OPEN_MAX: usize = 1;

pub use preallocation::{PREALLOCATE_GROW_MS, PREALLOCATE_STEP_MAX, PREALLOCATE_STEP_MIN};
/// Chunk writes allowed in flight per partition before an append waits for the oldest.
pub const WRITE_WINDOW: usize = 4;
/// Batches at least this large (librdkafka's default `batch.size` is 1 MB)...
pub const LARGE_BATCH_BYTES: usize = 512 << 10;
/// ...make the tail chunks allocated while they are copied this large instead of
/// `write_chunk_bytes`: a write that grows the segment file runs on an io_uring worker under the
/// file's inode lock, one at a time per file, and each costs a worker's wake-up (0.16-0.32 ms on
/// this 2-core VM, against ~0.6 ms of disk time per 1 MiB); a quarter as many writes wait a
/// quarter as often. Only partitions fed large batches pay the larger buffers (a partition's
/// tail and its `WRITE_WINDOW` writes in flight: at most 20 MiB, against 5 MiB). Measured
/// (librdkafka defaults, acks=all, 8 GB, 3 alternating rounds, issue #13): 1 MiB chunks with 16
/// MiB per connection 804 MB/s; 4 MiB chunks with 64 MiB (the broker's `PIPELINED_BYTES_MAX`)
/// 1,012 MB/s; 8 MiB with 64 MiB 956 in another run (BENCHMARKS.md).
pub const LARGE_WRITE_CHUNK_BYTES: usize = 4 << 20;
const _: () = assert!(LARGE_WRITE_CHUNK_BYTES.is_multiple_of(crate::io::DMA_ALIGNMENT));
/// Producer-state snapshots kept per partition (the newest ones).
pub const PRODUCER_SNAPSHOTS_KEPT: usize = 2;
/// Read size while replaying the log after a producer snapshot.
const PRODUCER_REPLAY_READ_BYTES: usize = 1 << 20;
/// Smallest read issued for the disk read path.
pub use crate::batch_reader::DISK_READ_BYTES_MIN;

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
    /// Where the durable end is in the files: (active segment base, its bytes below the
    /// durable end). A failed write cuts the active file back to it (`cut_back_locked`).
    pub(crate) durable_position: (i64, u64),
    /// Set once replication decides it (the minimum durable end over the in-sync replicas);
    /// `None`: it follows the log end (a partition without followers to wait for), short of
    /// what an append waiting for its sync holds back (`holds`).
    pub(crate) high_watermark: Option<i64>,
    /// Appends that must be synced before readers see them (`hold_until_durable`): their first
    /// offset, with how many holds start there.
    pub(crate) holds: BTreeMap<i64, usize>,
    pub(crate) epochs: Vec<EpochEntry>,
    pub(crate) tail: Tail<F::Buffer>,
    pub(crate) offline: bool,
    /// The write that took the log offline failed for lack of space (ENOSPC).
    pub(crate) offline_disk_full: bool,
    pub(crate) closed: bool,
    pub(crate) last_sync_ms: i64,
    /// How far ahead the active segment is reserved on disk (`preallocation`).
    pub(crate) preallocation: preallocation::Preallocation,
}

impl<F: StorageFile> LogState<F> {
    /// The active segment: the last one (a log always has one).
    pub(crate) fn active(&self) -> &Segment<F> {
        self.segments.values().next_back().expect("a log always has an active segment")
    }

    pub(crate) fn active_mut(&mut self) -> &mut Segment<F> {
        self.segments.values_mut().next_back().expect("a log always has an active segment")
    }

    /// How many segment files the log holds open.
    pub(crate) fn files_open(&self) -> usize {
        self.segments.values().filter(|segment| segment.file.is_some()).count()
    }

    pub(crate) fn high_watermark(&self) -> i64 {
        self.high_watermark
            .unwrap_or_else(|| self.held_end())
            .clamp(self.log_start_offset, self.visible_end())
    }

    /// Without a decided high watermark: the log end, or the first offset past the durable
    /// end that a hold keeps from readers, whichever is lower.
    fn held_end(&self) -> i64 {
        let held = self.holds.range(self.durable_end_offset..).next().map(|(from, _)| *from);
        held.map_or(self.log_end_offset, |from| from.min(self.log_end_offset))
    }

    /// Where readers stop: the log end, or once a write failed (offline) the durable end, so
    /// the records of the failed append (never acknowledged) are never served.
    pub(crate) fn visible_end(&self) -> i64 {
        if self.offline {
            self.durable_end_offset.max(self.log_start_offset)
        } else {
            self.log_end_offset
        }
    }

    /// After the log end moved back (truncation): the durable end and the high watermark
    /// follow it at once, so invariant 1 holds at every await point of the truncation.
    pub(crate) fn clamp_to_log_end(&mut self) {
        self.durable_end_offset = self.durable_end_offset.min(self.log_end_offset);
        self.high_watermark = self.high_watermark.map(|hw| hw.min(self.log_end_offset));
    }

    /// The offsets' order (module invariant 1); a violation is a bug in this module.
    pub(crate) fn check_offsets(&self) {
        assert!(
            self.log_start_offset <= self.log_end_offset,
            "log start {} past the log end {}",
            self.log_start_offset,
            self.log_end_offset
        );
        assert!(
            self.durable_end_offset <= self.log_end_offset,
            "durable end {} past the log end {}",
            self.durable_end_offset,
            self.log_end_offset
        );
        if let Some(high_watermark) = self.high_watermark {
            assert!(
                high_watermark <= self.log_end_offset,
                "high watermark {high_watermark} past the log end {}",
                self.log_end_offset
            );
        }
    }
}

impl<F: StorageFile> crate::open_files::CloseFiles for RefCell<LogState<F>> {
    /// Drops every segment file reference (an I/O in progress keeps its own until it is done).
    fn close_files(&self) -> usize {
        let Ok(mut state) = self.try_borrow_mut() else { return 0 };
        state.segments.values_mut().filter_map(|segment| segment.file.take()).count()
    }
}

/// A hold on a log's readers (`PartitionLog::hold_until_durable`), released when dropped.
#[must_use = "the hold is released when dropped"]
pub struct DurableHold<'a, S: Storage> {
    log: &'a PartitionLog<S>,
    from: i64,
}

impl<S: Storage> Drop for DurableHold<'_, S> {
    fn drop(&mut self) {
        let mut state = self.log.state.borrow_mut();
        if let Some(count) = state.holds.get_mut(&self.from) {
            *count -= 1;
            if *count == 0 {
                state.holds.remove(&self.from);
            }
        }
    }
}

/// One partition's log. See the module header for the write path and durability rule.
pub struct PartitionLog<S: Storage> {
    pub(crate) storage: S,
    pub(crate) dir: PathBuf,
    pub(crate) config: RefCell<LogConfig>,
    /// Shared with the shard's descriptor cache (`open_files`), which takes the segment files
    /// out of it to close them.
    pub(crate) state: Rc<RefCell<LogState<S::File>>>,
    /// This log's place in the shard's descriptor cache.
    pub(crate) files: crate::open_files::LogFiles,
    pub(crate) cache: Rc<RefCell<BatchCache>>,
    pub(crate) cache_key: CacheKey,
    pub(crate) write_lock: async_lock::Mutex<()>,
    pub(crate) sync_lock: async_lock::Mutex<()>,
    /// Serializes writes of the log-start checkpoint (taken after `write_lock` when both are
    /// held; retention writes it without `write_lock`).
    pub(crate) log_start_lock: async_lock::Mutex<()>,
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
    /// Truncations since open: a sync that began before one covers nothing after it.
    pub(crate) truncations: std::cell::Cell<u64>,
    /// (segment base, position) of damaged batches readers met, each reported once.
    pub(crate) damage_reported: RefCell<std::collections::BTreeSet<(i64, u64)>>,
    /// The read issued ahead for a sequential reader (`read_ahead`).
    pub(crate) read_ahead:
        RefCell<Option<read_ahead::ReadAhead<<S::File as StorageFile>::ReadBuffer>>>,
    /// Changes that rewrote or removed file bytes (each drops the read-ahead).
    pub(crate) rewrites: std::cell::Cell<u64>,
    /// Disk reads served from a read-ahead.
    pub(crate) read_ahead_hits: std::cell::Cell<u64>,
    /// Files of deleted segments, renamed `*.deleted`, not yet unlinked
    /// (`remove_deleted_files`).
    pub(crate) deleted_files: RefCell<Vec<std::path::PathBuf>>,
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
        let state = self.state.borrow();
        state.durable_end_offset.max(state.log_start_offset)
    }

    /// Offsets below this are committed: consumers read only below it. Follows the log end
    /// until `set_high_watermark` is used (replication).
    pub fn high_watermark(&self) -> i64 {
        self.state.borrow().high_watermark()
    }

    /// Keeps readers of a partition without a decided high watermark (one replica) from
    /// offsets at or past `from` (the log end, taken before an append whose producer waits for
    /// its sync) until they are durable or the hold is dropped. Such an append is refused if
    /// any write fails before its sync, and the log is then cut back to its durable end: a
    /// reader that saw it would have read records that were refused, then gone.
    pub fn hold_until_durable(&self, from: i64) -> DurableHold<'_, S> {
        *self.state.borrow_mut().holds.entry(from).or_default() += 1;
        DurableHold { log: self, from }
    }

    /// Sets the high watermark (the leader: the minimum durable end over the in-sync
    /// replicas). Once set it never moves backwards, except by truncation; it never passes the
    /// log end.
    pub fn set_high_watermark(&self, offset: i64) {
        let mut state = self.state.borrow_mut();
        assert!(
            offset <= state.log_end_offset,
            "high watermark {offset} past the log end {}",
            state.log_end_offset
        );
        let next = match state.high_watermark {
            Some(previous) => previous.max(offset),
            None => offset,
        };
        state.high_watermark = Some(next);
        state.check_offsets();
    }

    /// How many group-commit fdatasyncs have completed since open.
    pub fn syncs_completed(&self) -> u64 {
        self.syncs_completed.get()
    }

    /// OffsetForLeaderEpoch: (epoch, end offset) for `requested`, with `current` the
    /// partition's leader epoch now (`checkpoint::end_offset_for`).
    pub fn end_offset_for_epoch(&self, requested: i32, current: Option<i32>) -> (i32, i64) {
        let state = self.state.borrow();
        crate::checkpoint::end_offset_for(&state.epochs, requested, current, state.log_end_offset)
    }

    /// The leader epoch of the batch holding `offset`, from the leader-epoch checkpoint.
    pub fn epoch_at(&self, offset: i64) -> Option<i32> {
        crate::checkpoint::epoch_at(&self.state.borrow().epochs, offset)
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
        // Offline first: a log discarded for a reopen that failed is still offline (storage
        // error, KAFKA_STORAGE_ERROR), not moved away (NOT_LEADER_OR_FOLLOWER).
        if state.offline {
            return Err(StorageError::Offline(self.dir.clone()));
        }
        if state.closed {
            return Err(StorageError::Closed(self.dir.clone()));
        }
        Ok(())
    }

    /// Marks the log offline when an I/O step of a write fails, so a half-done write is never
    /// built upon; readers stop at the durable end from then on. The owner reopens it
    /// (`discard`, then `open`, which recovers) once the cause is gone. Logged once, with the
    /// cause (ENOSPC, EMFILE, EIO...).
    pub(crate) fn offline_on_error<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(error) = &result {
            let mut state = self.state.borrow_mut();
            if !state.offline && !state.closed {
                state.offline = true;
                state.offline_disk_full =
                    matches!(error, StorageError::Io(io_error) if io::is_disk_full(io_error));
                tracing::error!(
                    dir = %self.dir.display(),
                    %error,
                    durable_end = state.durable_end_offset,
                    log_end = state.log_end_offset,
                    "partition offline after a write failure: readers stop at the durable end"
                );
            }
        }
        result
    }

    /// Whether a write failed since the log was opened (it then refuses writes, and readers stop
    /// at the durable end).
    pub fn is_offline(&self) -> bool {
        self.state.borrow().offline
    }

    /// The open file of segment `base`, opened on demand: a sealed segment's when it is read
    /// (other sealed files past `SEALED_FILES_OPEN_MAX` are closed), and any segment's after
    /// the shard's descriptor cache closed it (`open_files`).
    pub(crate) async fn segment_file(&self, base: i64) -> Result<Rc<S::File>> {
        self.files.touch();
        let path = {
            let state = self.state.borrow();
            let segment = state.segments.get(&base).ok_or_else(|| {
                StorageError::InvalidArgument(format!("segment {base} is not in the log"))
            })?;
            if let Some(file) = &segment.file {
                return Ok(file.clone()); // the common case: every append asks for the active one
            }
            segment.path.clone()
        };
        // A turn among the short-lived opens: a thousand partitions reopening the files the
        // cache closed, all at once, would pass the open-files limit before any eviction ran
        // (EMFILE: measured at 1,200 partitions under nofile=1024). Held until the eviction.
        let _turn = io::short_lived_files().await;
        let file = Rc::new(self.storage.open(&path, false).await?);
        let stored = {
            let mut state = self.state.borrow_mut();
            match state.segments.get_mut(&base) {
                Some(segment) => match &segment.file {
                    // Another reader opened it meanwhile: share that one.
                    Some(other) => Some(other.clone()),
                    None => {
                        segment.file = Some(file.clone());
                        None
                    }
                },
                // Deleted meanwhile: this read uses the file alone.
                None => None,
            }
        };
        if let Some(other) = stored {
            return Ok(other);
        }
        self.trim_sealed_files(Some(base)).await;
        self.note_files_open();
        Ok(file)
    }

    /// The active segment's file (reopened if the descriptor cache closed it).
    pub(crate) async fn active_file(&self) -> Result<Rc<S::File>> {
        let base = self.state.borrow().active().base_offset;
        self.segment_file(base).await
    }

    /// Tells the shard's descriptor cache how many segment files this log holds now (after
    /// opening or closing some): past its limit, it closes other logs' files.
    pub(crate) fn note_files_open(&self) {
        let open = self.state.borrow().files_open();
        self.files.set_open(open);
    }

    /// Closes the files of sealed segments past `SEALED_FILES_OPEN_MAX`, sparing `keep`.
    pub(crate) async fn trim_sealed_files(&self, keep: Option<i64>) {
        let ahead_elsewhere = self
            .read_ahead
            .borrow()
            .as_ref()
            .is_some_and(|ahead| Some(ahead.segment_base()) != keep);
        if ahead_elsewhere {
            self.read_ahead.borrow_mut().take(); // it holds its segment's file open
        }
        let closing: Vec<Rc<S::File>> = {
            let mut state = self.state.borrow_mut();
            let active = state.segments.keys().next_back().copied();
            let mut open: Vec<i64> = state
                .segments
                .iter()
                .filter(|(base, segment)| Some(**base) != active && segment.file.is_some())
                .map(|(base, _)| *base)
                .collect();
            open.retain(|base| Some(*base) != keep);
            let spare = SEALED_FILES_OPEN_MAX.saturating_sub(usize::from(keep.is_some()));
            let excess = open.len().saturating_sub(spare);
            open.truncate(excess);
            open.iter()
                .filter_map(|base| state.segments.get_mut(base).and_then(|s| s.file.take()))
                .collect()
        };
        for file in closing {
            // A reader still holding it drops it later (closed then, asynchronously).
            if let Ok(file) = Rc::try_unwrap(file) {
                if let Err(error) = self.storage.close(file).await {
                    tracing::debug!(%error, dir = %self.dir.display(), "closing a sealed segment");
                }
            }
        }
    }

    /// Whether the log is offline because its disk was full (ENOSPC).
    pub fn is_offline_for_space(&self) -> bool {
        let state = self.state.borrow();
        state.offline && state.offline_disk_full
    }

    /// Closes the log without writing anything (no index, snapshot or marker): for a log being
    /// deleted, or an offline one about to be reopened by recovery. Waits for writes in
    /// progress; later calls fail with `Closed`.
    pub async fn discard(&self) {
        let _sync = self.sync_lock.lock().await;
        let _write = self.write_lock.lock().await;
        self.drop_read_ahead();
        let segments = {
            let mut state = self.state.borrow_mut();
            if state.closed {
                return;
            }
            state.closed = true;
            std::mem::take(&mut state.segments)
        };
        self.note_files_open();
        self.inflight.borrow_mut().clear();
        self.cache.borrow_mut().forget(self.cache_key);
        for (_, segment) in segments {
            if let Some(Ok(file)) = segment.file.map(Rc::try_unwrap) {
                if let Err(error) = self.storage.close(file).await {
                    tracing::debug!(%error, dir = %self.dir.display(), "closing a discarded segment");
                }
            }
        }
    }
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
        file: Some(file),
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
