//! Truncation: every batch holding an offset at or after the target is removed (whole batches),
//! for replication's divergence handling.

use super::*;

/// Where a truncation cuts the segment it keeps last: at the first batch holding the offset.
struct Cut<F> {
    file: Rc<F>,
    path: PathBuf,
    base: i64,
    position: u64,
}

impl<S: Storage> PartitionLog<S> {
    /// Removes every batch holding an offset `>= offset` (whole batches: the log end becomes the
    /// base offset of the first removed batch). For replication's log reconciliation.
    pub async fn truncate_to(&self, offset: i64) -> Result<()> {
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        {
            let _write = self.write_lock.lock().await;
            self.check_writable()?;
            // The deleted segments' files are unlinked under the lock: a truncation must be
            // durable before the follower fetches past it (a crash must not bring the cut-off
            // batches back).
            let result = async {
                self.truncate_locked(offset).await?;
                self.remove_deleted_files().await
            }
            .await;
            self.offline_on_error(result)?;
        }
        // Batches above the cut are gone: rebuild the producer state from the snapshots left
        // (those above the cut are removed) and the log. Truncation happens on logs no client
        // appends to (recovery, a follower catching up), so the write lock is not held for it.
        // If that fails the log goes offline: its producer state is unknown until reopened.
        let result = self.load_producer_state(crate::runtime::now_ms()).await;
        self.offline_on_error(result)
    }

    /// Empties the log and starts it again, empty, at `offset` (which may be past its end):
    /// for a follower whose log end is below its leader's log start (retention or
    /// DeleteRecords moved it), as Kafka's `truncateFullyAndStartAt`. The leader epochs and
    /// producer snapshots go too; the producer state is rebuilt from what is replicated next.
    pub async fn restart_at(&self, offset: i64) -> Result<()> {
        {
            let _write = self.write_lock.lock().await;
            self.check_writable()?;
            let result = async {
                for snapshot in self.producer_snapshot_offsets().await? {
                    let path = self.dir.join(crate::producer_state::snapshot_file_name(snapshot));
                    self.storage.remove(&path).await?;
                }
                self.cut_locked(offset, true).await?;
                self.remove_deleted_files().await
            }
            .await;
            self.offline_on_error(result)?;
        }
        let result = self.load_producer_state(crate::runtime::now_ms()).await;
        self.offline_on_error(result)
    }

    pub(crate) async fn truncate_locked(&self, offset: i64) -> Result<()> {
        self.cut_locked(offset, false).await
    }

    /// Removes every batch at or after `offset`, or with `restart` every batch, the log then
    /// starting empty at `offset`.
    async fn cut_locked(&self, offset: i64, restart: bool) -> Result<()> {
        self.mutations.set(self.mutations.get() + 1);
        // A sync that started before this cut covered bytes the cut removes: it must not count
        // for what is appended after it (`sync_to` compares this).
        self.truncations.set(self.truncations.get() + 1);
        self.drop_read_ahead();
        if offset >= self.log_end_offset() && !restart {
            return Ok(());
        }
        self.write_out_locked().await?;
        let first_base = *self.state.borrow().segments.keys().next().expect("segments");
        // Every read happens before anything is deleted, so a read error leaves the log as it was.
        let cut =
            if offset > first_base && !restart { Some(self.find_cut(offset).await?) } else { None };
        // Remove whole segments from the newest backwards, so a crash leaves a prefix.
        let doomed: Vec<i64> = {
            let state = self.state.borrow();
            let from = if restart { first_base + 1 } else { offset.max(first_base + 1) };
            state.segments.range(from..).map(|(base, _)| *base).rev().collect()
        };
        for base in doomed {
            self.delete_segment_locked(base).await?;
        }
        match cut {
            None => self.restart_empty_at(offset, first_base, restart).await?,
            Some(cut) => self.cut_last_segment(cut).await?,
        }
        self.reload_tail_locked().await?;
        let log_end = self.log_end_offset();
        let epochs_changed = self.follow_log_end(log_end, restart);
        if epochs_changed {
            let epochs = self.state.borrow().epochs.clone();
            let path = checkpoint::path_in(&self.dir, checkpoint::LEADER_EPOCH_FILE);
            io::write_file_atomic(&self.storage, &path, &checkpoint::encode_epochs(&epochs))
                .await?;
        }
        self.persist_log_start().await?;
        if restart {
            self.cache.borrow_mut().forget(self.cache_key);
        } else {
            self.cache.borrow_mut().truncate(self.cache_key, log_end);
        }
        Ok(())
    }

    /// Finds the cut for `offset`: the segment below it and its batch holding it (reads only).
    async fn find_cut(&self, offset: i64) -> Result<Cut<S::File>> {
        let (path, base) = {
            let state = self.state.borrow();
            let (_, holder) =
                state.segments.range(..offset).next_back().expect("a segment below offset");
            (holder.path.clone(), holder.base_offset)
        };
        let file = self.segment_file(base).await?;
        let position = self.position_of_batch_holding(&file, &path, base, offset).await?;
        Ok(Cut { file, path, base, position })
    }

    /// Replaces the first (by now the only) segment with an empty one starting at `offset`.
    async fn restart_empty_at(&self, offset: i64, first_base: i64, restart: bool) -> Result<()> {
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
        state.clamp_to_log_end();
        if restart {
            // Empty and synced: durable up to where it starts, nothing below to read.
            state.durable_end_offset = offset;
            state.high_watermark = state.high_watermark.map(|_| offset);
        }
        drop(state);
        self.note_files_open();
        Ok(())
    }

    /// Cuts the last kept segment short at `cut` and rescans what is left of it.
    async fn cut_last_segment(&self, cut: Cut<S::File>) -> Result<()> {
        let Cut { file, path, base, position } = cut;
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
        // The cut dropped whatever was reserved past it.
        segment.preallocated_end = 0;
        state.log_end_offset = segment.next_offset;
        state.log_start_offset = state.log_start_offset.min(state.log_end_offset);
        state.clamp_to_log_end();
        Ok(())
    }

    /// Brings the durable end, high watermark and epochs to `log_end`; whether epochs changed.
    fn follow_log_end(&self, log_end: i64, restart: bool) -> bool {
        let mut state = self.state.borrow_mut();
        state.durable_end_offset = state.durable_end_offset.min(log_end);
        let active = state
            .segments
            .values()
            .next_back()
            .map(|active| (active.base_offset, active.size_bytes));
        if let Some((active_base, active_size)) = active {
            let (base, size) = state.durable_position;
            state.durable_position = if base == active_base && state.durable_end_offset < log_end {
                (base, size.min(active_size))
            } else {
                (active_base, active_size)
            };
        }
        state.high_watermark = state.high_watermark.map(|hw| hw.min(log_end));
        state.check_offsets();
        let before = state.epochs.len();
        state.epochs.retain(|entry| entry.start_offset < log_end && !restart);
        before != state.epochs.len()
    }

    pub(crate) async fn position_of_batch_holding(
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
    pub(crate) async fn reload_tail_locked(&self) -> Result<()> {
        let file = self.active_file().await?;
        let size = self.state.borrow().active().size_bytes;
        let page = tail::read_partial_page(&*file, size, &self.dir).await?;
        self.state.borrow_mut().tail = Tail::on_disk(size, page);
        Ok(())
    }
}
