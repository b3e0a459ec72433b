//! Idempotent-producer state on disk: snapshots at each roll and clean close, and the load at
//! open (the newest readable snapshot plus only the batches after it).

use super::*;

impl<S: Storage> PartitionLog<S> {
    /// Writes the producer state as of the log end (`<log end>.snapshot`) and keeps only the
    /// newest `PRODUCER_SNAPSHOTS_KEPT`. Caller holds `write_lock`, so every batch below the
    /// log end is in the state.
    pub(crate) async fn write_producer_snapshot_locked(&self) -> Result<()> {
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
    pub(crate) async fn producer_snapshot_offsets(&self) -> Result<Vec<i64>> {
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
    pub fn active_producers(&self) -> Vec<crate::producer_state::ActiveProducer> {
        self.producers.borrow().active()
    }
}
