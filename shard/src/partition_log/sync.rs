//! Group commit (one fdatasync at a time covers every append before it; while many logs of the
//! shard sync at once, one shared syncfs covers them all: `shared_sync`), interval flushes,
//! and the clean close.
//! Appends that arrive while a sync runs join the next one; their full chunks are written
//! behind as they fill (`WRITE_WINDOW`), so large appends' writes overlap the running sync. The
//! partial tail is written only by the next sync itself: writing it out ahead, while the
//! current sync runs, was measured slower (issue #13, librdkafka acks=all: 16 KiB batches 64-92
//! MB/s with it, 119-134 without; 1 MB batches 271-318 vs 353-385), since each O_DIRECT write
//! that extends the file is a blocking kernel job of its own.

use super::*;

impl<S: Storage> PartitionLog<S> {
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
            let (file, end, position) = {
                let _write = self.write_lock.lock().await;
                // A roll (which syncs) may have covered the target while this waited, and then
                // the log may have gone offline: what is durable is answered as durable.
                if self.state.borrow().durable_end_offset >= target {
                    return Ok(());
                }
                self.check_writable()?;
                let result = async {
                    self.write_out_locked().await?;
                    self.active_file().await
                }
                .await;
                let file = match self.offline_on_error(result) {
                    Ok(file) => file,
                    Err(error) => {
                        self.cut_back_locked().await;
                        return Err(error);
                    }
                };
                let state = self.state.borrow();
                let active = state.active();
                (file, state.log_end_offset, (active.base_offset, active.size_bytes))
            };
            let truncations = self.truncations.get();
            let sync_started = std::time::Instant::now();
            let syncing = crate::shared_sync::Syncing::begin();
            let synced = if syncing.shared() {
                crate::shared_sync::sync(&*file).await
            } else {
                file.sync().await
            };
            drop(syncing);
            let synced = synced.map_err(StorageError::from);
            if let Err(error) = self.offline_on_error(synced) {
                let _write = self.write_lock.lock().await;
                self.cut_back_locked().await;
                return Err(error);
            }
            self.syncs_completed.set(self.syncs_completed.get() + 1);
            self.sync_latency_us
                .borrow_mut()
                .saturating_record(sync_started.elapsed().as_micros().max(1) as u64);
            if self.is_offline() {
                // Another append's write failed while this sync ran, and the file was cut back
                // to the durable end it had then: what this sync covered past it may be gone,
                // so it counts for nothing (the target may still be durable by then).
                if self.state.borrow().durable_end_offset >= target {
                    return Ok(());
                }
                return Err(StorageError::Offline(self.dir.clone()));
            }
            if self.truncations.get() != truncations {
                // The log was cut while this sync ran: what it covered past the cut is gone,
                // and what was appended since is not covered. Sync again.
                continue;
            }
            let mut state = self.state.borrow_mut();
            if end > state.durable_end_offset && state.durable_position.0 <= position.0 {
                // (A roll since the sync began already made everything before it durable.)
                let active_base = state.segments.keys().next_back().copied();
                if active_base == Some(position.0) {
                    state.durable_position = position;
                }
            }
            state.durable_end_offset = state.durable_end_offset.max(end.min(state.log_end_offset));
            state.check_offsets();
        }
    }

    /// After a failed write (the log is offline): waits out the writes in flight, then cuts
    /// the active file back to the durable end and syncs that, so the failed append's bytes
    /// (never acknowledged) cannot come back at a restart or a reopen. Best effort: if this
    /// fails too, the reopen's recovery still truncates to the durable end when it is known.
    /// Caller holds `write_lock`.
    pub(crate) async fn cut_back_locked(&self) {
        self.drop_read_ahead();
        loop {
            let next = self.inflight.borrow_mut().pop_front();
            let Some(next) = next else { break };
            if let Some(future) = next.future {
                let _ = future.await;
            }
        }
        let (base, durable_size) = {
            let state = self.state.borrow();
            let Some(active) = state.segments.values().next_back() else { return };
            if active.base_offset != state.durable_position.0 {
                return;
            }
            (active.base_offset, state.durable_position.1)
        };
        let cut = async {
            let file = self.segment_file(base).await?;
            if file.size().await? > durable_size {
                file.truncate(durable_size).await?;
                file.sync().await?;
                // (The cut dropped the reservation past the durable end too.)
                if let Some(active) = self.state.borrow_mut().segments.get_mut(&base) {
                    active.preallocated_end = 0;
                }
            }
            Ok::<(), StorageError>(())
        };
        if let Err(error) = cut.await {
            tracing::warn!(dir = %self.dir.display(), %error, "cutting an offline log back to its durable end failed");
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

    /// Clean shutdown: writes and syncs everything, trims the active file, writes its indexes and
    /// the clean-shutdown marker, so the next open skips the recovery scan.
    pub async fn close(&self) -> Result<()> {
        let _sync = self.sync_lock.lock().await;
        let _write = self.write_lock.lock().await;
        self.drop_read_ahead();
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
                self.persist_log_start().await?;
            }
            let marker = checkpoint::path_in(&self.dir, checkpoint::CLEAN_SHUTDOWN_FILE);
            let clean = {
                let state = self.state.borrow();
                checkpoint::CleanShutdown {
                    log_end: state.log_end_offset,
                    segments: Some(
                        state
                            .segments
                            .values()
                            .map(|segment| checkpoint::VouchedSegment {
                                base: segment.base_offset,
                                size_bytes: segment.size_bytes,
                                next_offset: segment.next_offset,
                            })
                            .collect(),
                    ),
                }
            };
            let encoded = checkpoint::encode_clean_shutdown(&clean);
            io::write_file_atomic(&self.storage, &marker, &encoded).await?;
            Ok(())
        }
        .await;
        self.offline_on_error(result)?;
        let segments = {
            let mut state = self.state.borrow_mut();
            state.closed = true;
            state.durable_end_offset = state.log_end_offset;
            if let Some(active) = state.segments.values().next_back() {
                state.durable_position = (active.base_offset, active.size_bytes);
            }
            std::mem::take(&mut state.segments)
        };
        self.note_files_open();
        self.cache.borrow_mut().forget(self.cache_key);
        for (_, segment) in segments {
            if let Some(Ok(file)) = segment.file.map(Rc::try_unwrap) {
                self.storage.close(file).await?;
            }
        }
        Ok(())
    }
}
