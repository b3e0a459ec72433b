//! The write path: append (validate, patch the broker-owned fields, copy into the tail
//! chunk), write-behind of full chunks, and writing the partial tail out when needed.
//! Durability rule: see the module header of `partition_log`.

use super::*;

/// Who chose a batch's offset and epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// This node leads the partition: the batch gets the next offset and this epoch.
    Leader(i32),
    /// Copied from the leader: offset and epoch are the batch's own.
    Replica,
}

impl From<i32> for Stamp {
    fn from(leader_epoch: i32) -> Self {
        Stamp::Leader(leader_epoch)
    }
}

/// A batch to append: a client's, whose broker-owned fields are patched in place, or a
/// leader's, kept as it came (shared with the fetch answer that carried it: no copy before the
/// one into the tail).
pub(crate) enum Incoming {
    Owned(BytesMut),
    Shared(Bytes),
    /// A client's batch the broker checked once (`wire::CheckedBatch`: framing and CRC): its
    /// header is read here, never parsed again.
    Checked(CheckedBatchMut),
}

impl std::ops::Deref for Incoming {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Incoming::Owned(batch) => batch,
            Incoming::Shared(batch) => batch,
            Incoming::Checked(batch) => batch.as_slice(),
        }
    }
}

impl Incoming {
    /// The batch's header: read from a checked batch, parsed from any other.
    fn header(&self) -> Result<RecordBatchHeader<'_>> {
        match self {
            Incoming::Checked(batch) => Ok(batch.header()),
            other => Ok(RecordBatchHeader::parse(other, crate::config::BATCH_BYTES_MAX)?),
        }
    }
}

/// A batch as the log stores it, stamped.
enum Stored {
    Checked(CheckedBatch),
    Raw(Bytes),
}

impl Stored {
    fn bytes(&self) -> &Bytes {
        match self {
            Stored::Checked(batch) => batch.bytes(),
            Stored::Raw(bytes) => bytes,
        }
    }

    fn header(&self) -> Result<RecordBatchHeader<'_>> {
        match self {
            Stored::Checked(batch) => Ok(batch.header()),
            Stored::Raw(bytes) => {
                Ok(RecordBatchHeader::parse(bytes, crate::config::BATCH_BYTES_MAX)?)
            }
        }
    }
}

impl<S: Storage> PartitionLog<S> {
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
        self.append_inner(Incoming::Owned(batch), leader_epoch, now_ms, sync, true).await
    }

    /// `append_with` for a batch the broker checked once (`wire::CheckedBatch`: framing and
    /// CRC32C, on the produce path): its header is read, not parsed, and its CRC not computed
    /// again. Its size and codec are checked here.
    pub async fn append_checked(
        &self,
        batch: CheckedBatchMut,
        leader_epoch: i32,
        now_ms: i64,
        sync: bool,
    ) -> Result<AppendInfo> {
        self.append_inner(Incoming::Checked(batch), leader_epoch, now_ms, sync, false).await
    }

    /// Appends a batch copied from the partition's leader (replication): its base offset and
    /// partition leader epoch are kept, byte for byte, and must continue this log (the base
    /// offset is the log end; the epoch is not older than the history's latest). The producer
    /// state is rebuilt from it without sequence checks (the leader made them), so
    /// deduplication survives a failover. Not synced here: a follower makes its appends durable
    /// under the topic's flush policy before it fetches more.
    pub async fn append_replica(&self, batch: Bytes, now_ms: i64) -> Result<AppendInfo> {
        self.append_inner(Incoming::Shared(batch), Stamp::Replica, now_ms, false, true).await
    }

    pub(crate) async fn append_inner(
        &self,
        batch: Incoming,
        stamp: impl Into<Stamp>,
        now_ms: i64,
        sync: bool,
        verify_crc: bool,
    ) -> Result<AppendInfo> {
        let stamp = stamp.into();
        let producer_batch = self.check_incoming(&batch, verify_crc)?;
        // Back-pressure before the lock: while the shard's write buffers are over budget, wait
        // for writes to complete and idle tails to be released (`write_budget`).
        crate::write_budget::room().await;
        let guard = self.write_lock.lock().await;
        self.check_writable()?;
        if stamp == Stamp::Replica {
            // Checked before anything is written: a refused batch leaves the log as it was.
            self.check_replica_continues(&batch)?;
        }
        if let (Some(producer_batch), Stamp::Leader(_)) = (&producer_batch, stamp) {
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
        let result = self.append_locked(batch, stamp, now_ms).await;
        let info = match self.offline_on_error(result) {
            Ok(info) => info,
            Err(error) => {
                if self.is_offline() {
                    self.cut_back_locked().await;
                }
                return Err(error);
            }
        };
        if let Some(producer_batch) = &producer_batch {
            self.producers.borrow_mut().record(producer_batch, info.base_offset, info.last_offset);
        }
        drop(guard);
        if sync {
            self.sync_to(info.last_offset + 1).await?;
        }
        Ok(info)
    }

    /// A batch's framing, size, codec and (with `verify_crc`) CRC; its producer fields.
    fn check_incoming(&self, batch: &Incoming, verify_crc: bool) -> Result<Option<ProducerBatch>> {
        let max_message_bytes = self.config.borrow().max_message_bytes;
        let header = batch.header()?;
        if header.size_bytes() != batch.len() {
            // A checked batch is exactly one batch (`wire::CheckedBatch`'s invariant).
            assert!(!matches!(batch, Incoming::Checked(_)), "a checked batch is not one batch");
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
        Ok(ProducerBatch::of(&header))
    }

    /// A batch copied from the leader continues this log: its epoch is not older than the
    /// history's latest, and it starts at the log end.
    fn check_replica_continues(&self, batch: &[u8]) -> Result<()> {
        let header = RecordBatchHeader::parse(batch, crate::config::BATCH_BYTES_MAX)?;
        let (base_offset, epoch) = (header.base_offset(), header.partition_leader_epoch());
        if let Some(latest) = self.latest_epoch().filter(|latest| epoch < *latest) {
            return Err(StorageError::StaleLeaderEpoch { epoch, latest_epoch: latest });
        }
        let log_end = self.log_end_offset();
        if base_offset != log_end {
            return Err(StorageError::InvalidArgument(format!(
                "a replica batch at offset {base_offset} does not continue the log, which \
                 ends at {log_end}"
            )));
        }
        Ok(())
    }

    pub(crate) async fn append_locked(
        &self,
        batch: Incoming,
        stamp: impl Into<Stamp>,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let stamp = stamp.into();
        let leader_epoch = match stamp {
            Stamp::Leader(epoch) => epoch,
            Stamp::Replica => RecordBatchHeader::parse(&batch, crate::config::BATCH_BYTES_MAX)?
                .partition_leader_epoch(),
        };
        self.mutations.set(self.mutations.get() + 1);
        self.record_epoch_locked(leader_epoch).await?;
        let base_offset = self.roll_if_due_locked(batch.len() as u64, now_ms).await?;
        // Space for the batch is reserved before it becomes visible (log end, cache): a full
        // disk (ENOSPC) fails the append here, before any reader could see the batch.
        let active_file = self.active_file().await?;
        self.preallocate_ahead_locked(&active_file, batch.len() as u64, now_ms).await?;
        let stored = stamped(batch, stamp, base_offset)?;
        let bytes = stored.bytes().clone();
        let header = stored.header()?;
        let last_offset = header.last_offset();
        let (file, full_chunks) = {
            let mut state = self.state.borrow_mut();
            let interval = self.config.borrow().index_interval_bytes;
            let state = &mut *state;
            let active = state.segments.values_mut().next_back().expect("active segment");
            let position = active.size_bytes;
            active.note_batch(&header, position, interval);
            // The file taken above (the cache may have closed the segment's meanwhile).
            let file = active_file.clone();
            assert_eq!(state.tail.start + state.tail.len as u64, position);
            let configured = self.config.borrow().write_chunk_bytes;
            state.tail.refill(&*file, configured);
            let full_chunks = state.tail.copy_in(&*file, &bytes, configured);
            state.tail.last_append_ms = now_ms;
            state.log_end_offset = last_offset + 1;
            state.check_offsets();
            (file, full_chunks)
        };
        self.cache.borrow_mut().insert(self.cache_key, base_offset, last_offset, bytes);
        for chunk in full_chunks {
            self.submit_full_chunk_locked(&file, chunk).await?;
        }
        self.complete_writes_locked(WRITE_WINDOW).await?;
        Ok(AppendInfo {
            base_offset,
            last_offset,
            log_start_offset: self.log_start_offset(),
            duplicate: false,
        })
    }

    /// Rolls the active segment when a batch of `batch_bytes` would make it too big, too old
    /// or past the offsets an index can hold; the log end, where the batch goes.
    async fn roll_if_due_locked(&self, batch_bytes: u64, now_ms: i64) -> Result<i64> {
        let (needs_roll, base_offset) = {
            let state = self.state.borrow();
            let config = self.config.borrow();
            let active = state.active();
            let too_big = active.size_bytes + batch_bytes > config.segment_bytes;
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
        Ok(base_offset)
    }

    /// Adds `leader_epoch` to the epoch history (durably, before any batch carries it).
    pub(crate) async fn record_epoch_locked(&self, leader_epoch: i32) -> Result<()> {
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

    /// Writes a chunk that just filled, from its first page no sync has written yet: a sync
    /// writes the partial tail out, so under frequent syncs (acks=all, a follower) most of a
    /// chunk is on disk before it fills, and writing it whole again wrote that data twice.
    /// Caller holds `write_lock` (so no sync's write is in flight).
    async fn submit_full_chunk_locked(
        &self,
        file: &Rc<S::File>,
        chunk: tail::FullChunk<<S::File as StorageFile>::Buffer>,
    ) -> Result<()> {
        let tail::FullChunk { position, buffer, held } = chunk;
        let written = self.state.borrow().tail.written_end;
        let len = buffer.as_slice().len() as u64;
        if written <= position {
            return self.submit_write_locked(file, position, buffer, held).await;
        }
        if written >= position + len {
            return Ok(());
        }
        let from = align_down(written);
        let skip = (from - position) as usize;
        let mut rest = file.alloc_buffer(len as usize - skip);
        if let (Some(target), Some(source)) =
            (rest.as_mut_slice().get_mut(..), buffer.as_slice().get(skip..))
        {
            target.copy_from_slice(source);
        }
        drop(buffer);
        self.submit_write_locked(file, from, rest, held).await
    }

    /// Submits one full chunk write and keeps it in flight (write-behind), with the budget its
    /// buffer holds. Caller holds `write_lock`.
    pub(crate) async fn submit_write_locked(
        &self,
        file: &Rc<S::File>,
        position: u64,
        buffer: <S::File as StorageFile>::Buffer,
        held: Option<crate::write_budget::Held>,
    ) -> Result<()> {
        let end = position + buffer.as_slice().len() as u64;
        let file = file.clone();
        let mut future: io::LocalFuture<std::io::Result<()>> = Box::pin(async move {
            let written = file.write_at(buffer, position).await;
            drop(held); // the buffer is gone: its budget goes back now
            written
        });
        // Polling once submits the write; it completes while this task goes on. Its memory
        // goes back when it is polled to completion: by this log's next appends, or by
        // `reap_writes` (the partition service, when appends wait for the budget). Running each
        // write's completion as a task of its own instead (memory back at once) measured
        // 0.78-0.89x of the base in 5-round bench/compare.py runs, weak evidence (those
        // scenarios are bimodal), but the append waiting on its oldest write would then wait
        // for that task's turn as well; this is the path the base had.
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

    /// Polls this log's writes in flight without waiting, dropping those that completed (their
    /// buffers go back to the shard's budget) and advancing `written_end` in order. Skips a
    /// log that is writing (its append does this itself). A failed write is left for the
    /// append or sync that waits on it, which takes the log offline.
    pub async fn reap_writes(&self) {
        let Some(_write) = self.write_lock.try_lock() else { return };
        loop {
            let oldest = self.inflight.borrow_mut().pop_front();
            let Some(mut oldest) = oldest else { return };
            let done = match oldest.future.as_mut() {
                None => true,
                Some(future) => match futures_lite::future::poll_once(future).await {
                    Some(Ok(())) => true,
                    Some(Err(error)) => {
                        // Kept as a failed write for whoever waits on it next.
                        oldest.future = Some(Box::pin(std::future::ready(Err(error))));
                        false
                    }
                    None => false,
                },
            };
            if !done {
                self.inflight.borrow_mut().push_front(oldest);
                return;
            }
            let mut state = self.state.borrow_mut();
            state.tail.written_end = state.tail.written_end.max(oldest.end);
        }
    }

    /// Waits for the oldest in-flight writes until at most `keep` remain, advancing
    /// `written_end` in order. Caller holds `write_lock`.
    pub(crate) async fn complete_writes_locked(&self, keep: usize) -> Result<()> {
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
    pub(crate) async fn write_out_locked(&self) -> Result<()> {
        self.complete_writes_locked(0).await?;
        {
            let state = self.state.borrow();
            let tail = &state.tail;
            if tail.written_end >= tail.start + tail.len as u64 || tail.buffer.is_none() {
                return Ok(());
            }
        }
        let file = self.active_file().await?;
        let (position, buffer, end) = {
            let state = self.state.borrow();
            let tail = &state.tail;
            let end = tail.start + tail.len as u64;
            if tail.written_end >= end {
                return Ok(());
            }
            let Some(source) = tail.buffer.as_ref() else { return Ok(()) };
            let from = align_down(tail.written_end.max(tail.start));
            let to = align_up(end);
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
            (from, buffer, end)
        };
        file.write_at(buffer, position).await?;
        self.state.borrow_mut().tail.written_end = end;
        Ok(())
    }
}

/// The batch as the log stores it: a leader's stamped with its offset and leader epoch in
/// place; a replica's as the leader wrote it.
fn stamped(batch: Incoming, stamp: Stamp, base_offset: i64) -> Result<Stored> {
    Ok(match (batch, stamp) {
        (Incoming::Checked(mut batch), Stamp::Leader(epoch)) => {
            batch.stamp(base_offset, epoch);
            Stored::Checked(batch.freeze())
        }
        (Incoming::Owned(mut batch), Stamp::Leader(epoch)) => {
            let mut view = wire::record_batch::RecordBatchMut::new(
                &mut batch,
                crate::config::BATCH_BYTES_MAX,
            )?;
            view.set_base_offset(base_offset);
            view.set_partition_leader_epoch(epoch);
            Stored::Raw(batch.freeze())
        }
        (Incoming::Owned(batch), Stamp::Replica) => Stored::Raw(batch.freeze()),
        (Incoming::Checked(batch), Stamp::Replica) => Stored::Checked(batch.freeze()),
        (Incoming::Shared(batch), Stamp::Replica) => Stored::Raw(batch),
        (Incoming::Shared(_), Stamp::Leader(_)) => {
            unreachable!("a leader's append owns its batch, to stamp it")
        }
    })
}
