//! Retention and DeleteRecords: whole segments below the log start go; the log start moves
//! forward durably.

use super::*;

impl<S: Storage> PartitionLog<S> {
    pub(crate) async fn delete_segment_locked(&self, base: i64) -> Result<()> {
        self.mutations.set(self.mutations.get() + 1);
        self.drop_read_ahead();
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

    pub(crate) async fn persist_log_start_locked(&self) -> Result<()> {
        self.mutations.set(self.mutations.get() + 1);
        let log_start = self.log_start_offset();
        let path = checkpoint::path_in(&self.dir, checkpoint::LOG_START_OFFSET_FILE);
        let pairs = checkpoint::encode_pairs(&[(0, log_start)]);
        io::write_file_atomic_freeing_space(&self.storage, &path, &pairs).await?;
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
        {
            let mut state = self.state.borrow_mut();
            state.log_start_offset = offset;
            state.check_offsets();
        }
        let result = async {
            self.persist_log_start_locked().await?;
            self.delete_segments_below_start_locked().await
        }
        .await;
        self.offline_on_error(result)?;
        self.producers.borrow_mut().expire(offset, i64::MIN, i64::MAX);
        Ok(offset)
    }

    pub(crate) async fn delete_segments_below_start_locked(&self) -> Result<()> {
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
}
