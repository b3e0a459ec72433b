//! Segment roll: the active segment is written out, synced, trimmed and sealed with its index
//! files, then a new active segment starts.

use super::*;

impl<S: Storage> PartitionLog<S> {
    /// Seals the active segment and starts a new one at the log end offset.
    pub async fn roll(&self, now_ms: i64) -> Result<()> {
        let _write = self.write_lock.lock().await;
        self.check_writable()?;
        let result = self.roll_locked(now_ms).await;
        self.offline_on_error(result)
    }

    pub(crate) async fn roll_locked(&self, now_ms: i64) -> Result<()> {
        self.mutations.set(self.mutations.get() + 1);
        let is_empty = {
            let state = self.state.borrow();
            let active = state.active();
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
        {
            let _turn = io::short_lived_files().await;
            self.storage.sync_dir(&self.dir).await?;
        }
        {
            let mut state = self.state.borrow_mut();
            state
                .segments
                .insert(base_offset, new_segment(base_offset, Rc::new(file), path, now_ms));
            state.tail.restart();
            state.durable_end_offset = state.log_end_offset;
            state.durable_position = (base_offset, 0);
        }
        // The segment just sealed closes its file (reads reopen it on demand).
        self.trim_sealed_files(None).await;
        self.note_files_open();
        self.write_producer_snapshot_locked().await
    }

    /// Writes the active segment out completely, trims the file to its logical size, syncs it,
    /// and writes its index files. Caller holds `write_lock`.
    pub(crate) async fn seal_active_locked(&self) -> Result<()> {
        self.write_out_locked().await?;
        let file = self.active_file().await?;
        let (size, base_offset, index, time_index) = {
            let mut state = self.state.borrow_mut();
            let active = state.active_mut();
            active.seal_time_index();
            (
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
}
