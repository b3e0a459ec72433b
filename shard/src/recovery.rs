//! Opening a partition log: crash recovery and the clean-restart fast path.
//!
//! After a clean shutdown (marker present) segment sizes and index files are trusted after cheap
//! checks. Otherwise sealed segments are trusted (each was synced whole with its indexes when it
//! was rolled) and the active segment, the only one written since, is scanned batch by batch
//! (length, magic, CRC32C, contiguous offsets, leader epoch against the epoch history); the
//! first invalid batch and everything after it are truncated away. Missing or damaged index
//! files are rebuilt by scanning their segment. I/O errors abort the open and never truncate.
//!
//! References: Kafka `LogLoader` (recovery point, `.kafka_cleanshutdown`), `LogSegment.recover`.

use crate::checkpoint::{self, EpochEntry};
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::index::{OffsetIndex, TimeIndex};
use crate::io::{self, Storage, StorageFile};
use crate::partition_log::{
    apply_scan, new_segment, tail, LogState, OpenOptions, PartitionLog, Tail,
};
use crate::segment::{self, Segment};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

impl<S: Storage> PartitionLog<S> {
    /// Opens (or creates) the log in `dir`, recovering it as the module header describes.
    pub async fn open(storage: S, dir: &Path, options: OpenOptions) -> Result<Self> {
        options.config.validate().map_err(StorageError::InvalidArgument)?;
        storage.create_dir_all(dir).await?;
        let names = storage.list_dir(dir).await?;
        // Half-written temporaries, and files of segments deleted before a crash or a close
        // that had not been unlinked yet.
        for name in names
            .iter()
            .filter(|name| name.ends_with(".tmp") || name.ends_with(crate::segment::DELETED_SUFFIX))
        {
            storage.remove(&dir.join(name)).await?;
        }
        let marker = checkpoint::path_in(dir, checkpoint::CLEAN_SHUTDOWN_FILE);
        let mut recovery = Recovery::read_checkpoints(storage, dir, &options, &marker).await?;
        let marker_found = recovery.vouched.is_some();
        let bases = recovery.list_segments(&names).await?;
        recovery.check_listing(&bases);
        recovery.load_segments(&bases).await?;
        recovery.reopen_active().await?;

        // No buffer until the first append: the partial last page only.
        let tail = {
            let active = recovery.segments.values().next_back().expect("at least one segment");
            let file = active.file.clone().expect("the active segment's file is open");
            let page = tail::read_partial_page(&*file, active.size_bytes, dir).await?;
            Tail::on_disk(active.size_bytes, page)
        };
        let first_base = *recovery.segments.keys().next().expect("at least one segment");
        let log_end = recovery.segments.values().next_back().expect("segment").next_offset;
        let log_start = recovery.decide_log_start(first_base, log_end).await?;
        recovery.trim_epochs_and_sync(log_end).await?;

        let now_ms = options.now_ms;
        let log = recovery.into_log(options, tail, log_start, log_end);
        log.note_files_open();
        log.load_producer_state(now_ms).await?;
        // The marker goes last: an open that fails before this point (a read error) leaves it,
        // and the next attempt is still a clean open.
        if marker_found {
            log.storage.remove(&marker).await?;
            log.storage.sync_dir(dir).await?;
        }
        Ok(log)
    }
}

/// What opening a log has read and decided so far, shared by its phases.
struct Recovery<'a, S: Storage> {
    storage: S,
    dir: &'a Path,
    config: LogConfig,
    now_ms: i64,
    /// The clean-shutdown marker, when present and readable.
    vouched: Option<checkpoint::CleanShutdown>,
    /// The log end the marker vouches for; `None` after a crash or once the files disagree.
    clean_log_end: Option<i64>,
    epochs: Vec<EpochEntry>,
    checkpointed_log_start: Option<i64>,
    /// The files disagree with the marker: every segment from here on is scanned.
    scan_all: bool,
    /// A damaged or discontinuous segment was met: the segments after it are removed.
    truncate_rest: bool,
    segments: BTreeMap<i64, Segment<S::File>>,
}

impl<'a, S: Storage> Recovery<'a, S> {
    /// Reads the clean-shutdown marker and the leader-epoch and log-start checkpoints.
    async fn read_checkpoints(
        storage: S,
        dir: &'a Path,
        options: &OpenOptions,
        marker: &Path,
    ) -> Result<Self> {
        let vouched: Option<checkpoint::CleanShutdown> = io::read_whole_file(&storage, marker)
            .await?
            .and_then(|bytes| checkpoint::decode_clean_shutdown(&bytes));
        let clean_log_end: Option<i64> = vouched.as_ref().map(|clean| clean.log_end);
        let epochs: Vec<EpochEntry> =
            io::read_whole_file(&storage, &checkpoint::path_in(dir, checkpoint::LEADER_EPOCH_FILE))
                .await?
                .and_then(|bytes| checkpoint::decode_epochs(&bytes))
                .unwrap_or_default();
        let checkpointed_log_start: Option<i64> = io::read_whole_file(
            &storage,
            &checkpoint::path_in(dir, checkpoint::LOG_START_OFFSET_FILE),
        )
        .await?
        .and_then(|bytes| checkpoint::decode_pairs(&bytes))
        .and_then(|pairs| pairs.first().map(|&(_, offset)| offset));
        Ok(Recovery {
            storage,
            dir,
            config: options.config.clone(),
            now_ms: options.now_ms,
            vouched,
            clean_log_end,
            epochs,
            checkpointed_log_start,
            scan_all: false,
            truncate_rest: false,
            segments: BTreeMap::new(),
        })
    }

    /// Lists the segments' bases, oldest first, removing orphan indexes; creates one if none.
    async fn list_segments(&self, names: &[String]) -> Result<Vec<i64>> {
        let mut bases: Vec<i64> =
            names.iter().filter_map(|name| segment::parse_segment_file_name(name, "log")).collect();
        bases.sort_unstable();
        for name in names {
            let orphan = segment::parse_segment_file_name(name, "index")
                .or_else(|| segment::parse_segment_file_name(name, "timeindex"))
                .is_some_and(|base| bases.binary_search(&base).is_err());
            if orphan {
                self.storage.remove(&self.dir.join(name)).await?;
            }
        }
        if bases.is_empty() {
            let base = self.checkpointed_log_start.unwrap_or(0).max(0);
            let path = self.dir.join(segment::log_file_name(base));
            let file = self.storage.open(&path, true).await?;
            self.storage.close(file).await?;
            self.storage.sync_dir(self.dir).await?;
            bases.push(base);
        }
        Ok(bases)
    }

    /// Checks the marker's list of segments against `bases`: full recovery when they differ.
    fn check_listing(&mut self, bases: &[i64]) {
        // The marker vouches for each segment's size and end (format 2); a listing or a file
        // that disagrees (a segment cut short or grown after the shutdown) means the marker is
        // not about these files: full recovery from the first disagreeing segment on.
        if let Some(segments) = self.vouched.as_ref().and_then(|clean| clean.segments.as_ref()) {
            let recorded: Vec<i64> = segments.iter().map(|segment| segment.base).collect();
            if recorded != bases {
                disagrees(self.dir, format!("segments {recorded:?} recorded, {bases:?} on disk"));
                self.scan_all = true;
                self.clean_log_end = None;
            }
        }
    }

    /// Loads the segments in `bases`, oldest first, removing those after damage or a gap.
    async fn load_segments(&mut self, bases: &[i64]) -> Result<()> {
        let mut expected_base: Option<i64> = None;
        let count = bases.len();
        for (position, &base) in bases.iter().enumerate() {
            if self.truncate_rest || expected_base.is_some_and(|expected| expected != base) {
                self.remove_segment(base).await?;
                continue;
            }
            let is_last = position + 1 == count;
            let next_base = bases.get(position + 1).copied();
            let segment = self.load_segment(base, next_base, is_last).await?;
            expected_base = Some(segment.next_offset);
            self.segments.insert(base, segment);
        }
        Ok(())
    }

    /// Removes the files of the segment at `base`, which follows a damaged or discontinuous one.
    async fn remove_segment(&mut self, base: i64) -> Result<()> {
        let path = self.dir.join(segment::log_file_name(base));
        tracing::warn!(path = %path.display(), "removing segment after a damaged or discontinuous one");
        self.truncate_rest = true;
        for name in [
            segment::log_file_name(base),
            segment::index_file_name(base),
            segment::time_index_file_name(base),
        ] {
            let doomed = self.dir.join(name);
            if self.storage.exists(&doomed).await? {
                self.storage.remove(&doomed).await?;
            }
        }
        self.storage.sync_dir(self.dir).await?;
        Ok(())
    }

    /// Opens the segment at `base` and loads it from its index files if trusted, else by a scan.
    async fn load_segment(
        &mut self,
        base: i64,
        next_base: Option<i64>,
        is_last: bool,
    ) -> Result<Segment<S::File>> {
        let path = self.dir.join(segment::log_file_name(base));
        let file = Rc::new(self.storage.open(&path, false).await?);
        let size = file.size().await?;
        self.check_vouched(base, next_base, size);
        let mut segment = new_segment(base, file.clone(), path.clone(), self.now_ms);
        let next_offset_hint = if is_last { self.clean_log_end } else { next_base };
        let trusted = if self.scan_all {
            false
        } else if !is_last || self.clean_log_end.is_some() {
            match next_offset_hint {
                Some(next_offset) => {
                    load_indexes(&self.storage, self.dir, &mut segment, size, next_offset).await?
                }
                None => false,
            }
        } else {
            false
        };
        if !trusted {
            self.scan_segment(&mut segment, &file, &path, size, is_last).await?;
        }
        if !is_last {
            // Sealed: its file opens again when it is read (`segment_file`).
            segment.file = None;
            if let Ok(file) = Rc::try_unwrap(file) {
                self.storage.close(file).await?;
            }
        }
        Ok(segment)
    }

    /// Checks the marker's record of the segment at `base` against its file (else full recovery).
    fn check_vouched(&mut self, base: i64, next_base: Option<i64>, size: u64) {
        let record = self
            .vouched
            .as_ref()
            .and_then(|clean| clean.segments.as_ref())
            .and_then(|segments| segments.iter().find(|segment| segment.base == base));
        if let Some(record) = record.filter(|_| !self.scan_all) {
            let next = next_base.or(self.clean_log_end);
            if record.size_bytes != size || Some(record.next_offset) != next {
                disagrees(
                    self.dir,
                    format!(
                        "segment {base}: {} bytes and next offset {} recorded, {size} bytes on \
                         disk and next offset {next:?}",
                        record.size_bytes, record.next_offset
                    ),
                );
                self.scan_all = true;
                self.clean_log_end = None;
            }
        }
    }

    /// Rebuilds `segment` by a scan, cutting it at the first invalid batch; rewrites its indexes.
    async fn scan_segment(
        &mut self,
        segment: &mut Segment<S::File>,
        file: &S::File,
        path: &Path,
        size: u64,
        is_last: bool,
    ) -> Result<()> {
        let base = segment.base_offset;
        let scan =
            segment::scan_segment(file, path, base, self.config.index_interval_bytes, &self.epochs)
                .await?;
        if let Some(reason) = &scan.stopped_early {
            // Zeros after the last batch are the page padding of direct-I/O writes, not
            // damage; anything else is a torn or corrupt tail worth a warning.
            let rest_len = (size - scan.valid_bytes).min(io::DMA_ALIGNMENT as u64 * 2);
            let rest = file.read_at(scan.valid_bytes, rest_len as usize).await?;
            let padding_only = size - scan.valid_bytes < io::DMA_ALIGNMENT as u64
                && rest.as_ref().iter().all(|&byte| byte == 0);
            if padding_only {
                tracing::debug!(path = %path.display(), valid_bytes = scan.valid_bytes, "trimming page padding after the last batch");
            } else {
                tracing::warn!(path = %path.display(), valid_bytes = scan.valid_bytes, file_bytes = size, %reason, "truncating the log at the first invalid batch");
            }
            file.truncate(scan.valid_bytes).await?;
            file.sync().await?;
            self.truncate_rest = true;
        }
        apply_scan(segment, scan);
        if !is_last && !self.truncate_rest {
            segment.seal_time_index();
            let index_path = self.dir.join(segment::index_file_name(base));
            io::write_file_atomic(&self.storage, &index_path, &segment.index.encode()).await?;
            let time_path = self.dir.join(segment::time_index_file_name(base));
            io::write_file_atomic(&self.storage, &time_path, &segment.time_index.encode()).await?;
        }
        Ok(())
    }

    /// Reopens the last segment's file if it was sealed, and removes its index files if stale.
    async fn reopen_active(&mut self) -> Result<()> {
        // A damaged later segment may have made a sealed one the last: the active one is open.
        let reopen = self
            .segments
            .values()
            .next_back()
            .filter(|last| last.file.is_none())
            .map(|last| (last.base_offset, last.path.clone()));
        if let Some((base, path)) = reopen {
            let file = Rc::new(self.storage.open(&path, false).await?);
            if let Some(last) = self.segments.get_mut(&base) {
                last.file = Some(file);
            }
        }
        if self.truncate_rest {
            // The last kept segment may have been sealed; it is the active one now and its index
            // files on disk no longer describe it.
            if let Some(last) = self.segments.values().next_back() {
                for name in [
                    segment::index_file_name(last.base_offset),
                    segment::time_index_file_name(last.base_offset),
                ] {
                    let stale = self.dir.join(name);
                    if self.storage.exists(&stale).await? {
                        self.storage.remove(&stale).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The log start: the checkpointed one, unless it lies past the log end.
    async fn decide_log_start(&self, first_base: i64, log_end: i64) -> Result<i64> {
        let dir = self.dir;
        let log_start = match self.checkpointed_log_start {
            // After a clean shutdown nothing unsynced was lost, so a log start past the end
            // cannot have been written by this log (DeleteRecords stops at the end): the
            // checkpoint is damaged. Hiding every record would be silent loss, so it is
            // ignored, loudly, and rewritten at the first segment.
            Some(checkpointed) if checkpointed > log_end && self.clean_log_end.is_some() => {
                tracing::warn!(
                    dir = %dir.display(),
                    checkpointed,
                    log_end,
                    first_offset = first_base,
                    "log start checkpoint is beyond the log end: ignored, log start set to the \
                     first segment"
                );
                let path = checkpoint::path_in(dir, checkpoint::LOG_START_OFFSET_FILE);
                let pairs = checkpoint::encode_pairs(&[(0, first_base)]);
                io::write_file_atomic(&self.storage, &path, &pairs).await?;
                first_base
            }
            // After a crash it is legitimate: records were deleted up to it (durably) and the
            // appends past the end were not synced. The deleted records stay deleted.
            Some(checkpointed) if checkpointed > log_end => {
                tracing::warn!(
                    dir = %dir.display(),
                    checkpointed,
                    log_end,
                    "log start checkpoint is beyond the log end after a crash (the appends after \
                     it were not synced): the log is empty and continues at its end"
                );
                log_end
            }
            checkpointed => checkpointed.unwrap_or(first_base).max(first_base),
        };
        Ok(log_start)
    }

    /// Drops the leader epochs past the log end, then syncs the directory and the active file.
    async fn trim_epochs_and_sync(&mut self, log_end: i64) -> Result<()> {
        let epochs_before = self.epochs.len();
        self.epochs.retain(|entry| entry.start_offset <= log_end);
        if self.epochs.len() != epochs_before {
            let path = checkpoint::path_in(self.dir, checkpoint::LEADER_EPOCH_FILE);
            io::write_file_atomic(&self.storage, &path, &checkpoint::encode_epochs(&self.epochs))
                .await?;
        }
        self.storage.sync_dir(self.dir).await?;
        if let Some(active) = self.segments.values().next_back() {
            if let Some(file) = &active.file {
                file.sync().await?;
            }
        }
        Ok(())
    }

    /// The open log, built from what recovery found and decided.
    fn into_log(
        self,
        options: OpenOptions,
        tail: Tail<<S::File as StorageFile>::Buffer>,
        log_start: i64,
        log_end: i64,
    ) -> PartitionLog<S> {
        let active_position = self
            .segments
            .values()
            .next_back()
            .map_or((0, 0), |active| (active.base_offset, active.size_bytes));
        let cache_key = options.cache.borrow_mut().register();
        let state = Rc::new(RefCell::new(LogState {
            segments: self.segments,
            log_start_offset: log_start,
            log_end_offset: log_end,
            durable_end_offset: log_end,
            durable_position: active_position,
            high_watermark: None,
            holds: BTreeMap::new(),
            epochs: self.epochs,
            tail,
            offline: false,
            offline_disk_full: false,
            closed: false,
            last_sync_ms: options.now_ms,
            preallocation: Default::default(),
        }));
        // The shard's descriptor cache closes this log's files through the shared state.
        let weak = Rc::downgrade(&state);
        let holder: std::rc::Weak<dyn crate::open_files::CloseFiles> = weak;
        let files = crate::open_files::register(holder);
        PartitionLog {
            storage: self.storage,
            dir: self.dir.to_path_buf(),
            config: RefCell::new(self.config),
            state,
            files,
            cache: options.cache,
            cache_key,
            write_lock: async_lock::Mutex::new(()),
            sync_lock: async_lock::Mutex::new(()),
            log_start_lock: async_lock::Mutex::new(()),
            syncs_completed: std::cell::Cell::new(0),
            sync_latency_us: options.sync_latency_us.clone(),
            inflight: RefCell::new(Default::default()),
            opened_clean: self.clean_log_end.is_some(),
            producers: RefCell::new(Default::default()),
            producer_recovery: std::cell::Cell::new(Default::default()),
            compacted_sealed_end: std::cell::Cell::new(None),
            mutations: std::cell::Cell::new(0),
            truncations: std::cell::Cell::new(0),
            damage_reported: RefCell::new(Default::default()),
            read_ahead: RefCell::new(None),
            rewrites: std::cell::Cell::new(0),
            read_ahead_hits: std::cell::Cell::new(0),
            deleted_files: RefCell::new(Vec::new()),
        }
    }
}

/// Warns that the clean-shutdown marker disagrees with the segments (full recovery follows).
fn disagrees(dir: &Path, why: String) {
    tracing::warn!(dir = %dir.display(), %why, "the clean-shutdown marker disagrees with the segments: running full recovery");
}

/// Loads a segment's index files if they are present and consistent with the segment; returns
/// false (so the caller rebuilds them by scanning) otherwise.
async fn load_indexes<S: Storage>(
    storage: &S,
    dir: &Path,
    segment: &mut Segment<S::File>,
    size: u64,
    next_offset: i64,
) -> Result<bool> {
    let base = segment.base_offset;
    let span = (next_offset - base).max(0) as u64;
    let Some(index_bytes) =
        io::read_whole_file(storage, &dir.join(segment::index_file_name(base))).await?
    else {
        return Ok(false);
    };
    let Some(time_bytes) =
        io::read_whole_file(storage, &dir.join(segment::time_index_file_name(base))).await?
    else {
        return Ok(false);
    };
    let (Some(index), Some(time_index)) = (
        OffsetIndex::decode(&index_bytes, size, span.max(1)),
        TimeIndex::decode(&time_bytes, span.max(1)),
    ) else {
        return Ok(false);
    };
    // The last index entry must point at a batch starting at the offset it names.
    if let Some((relative, position)) = index.last() {
        let Some(file) = segment.file.clone() else { return Ok(false) };
        let head = file.read_at(u64::from(position), wire::BATCH_HEADER_BYTES).await?;
        match wire::record_batch::peek_batch(head.as_ref(), crate::config::BATCH_BYTES_MAX) {
            Ok(peek) if peek.base_offset == base + i64::from(relative) => {}
            _ => return Ok(false),
        }
    }
    if span == 0 && size != 0 {
        return Ok(false);
    }
    segment.size_bytes = size;
    segment.next_offset = next_offset;
    segment.bytes_since_index_entry = size - index.last().map(|(_, p)| u64::from(p)).unwrap_or(0);
    if let Some((timestamp, relative)) = time_index.last() {
        segment.max_timestamp = timestamp;
        segment.offset_of_max_timestamp = base + i64::from(relative);
    }
    segment.index = index;
    segment.time_index = time_index;
    Ok(true)
}
