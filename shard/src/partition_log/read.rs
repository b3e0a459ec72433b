//! The read path: from the batch cache, or from disk through the shared batch reader, which
//! checks every batch as the write path did (length, magic, CRC32C, contiguous base offsets);
//! and lookups by timestamp. A batch that fails those checks (a damaged sealed segment) ends a
//! read: the batches before it are served, and a read starting at it fails with
//! `StorageError::DamagedBatch` (CORRUPT_MESSAGE), so a consumer gets everything intact up to
//! the damage and then a clear error, never a silent stall.

use super::*;
use crate::batch_reader::{BatchReader, Next, ReadError, DISK_READ_BYTES_MIN};

/// The offset after the last of `batches`.
fn next_offset_after(batches: &[Bytes]) -> Option<i64> {
    let last = batches.last()?;
    let header = RecordBatchHeader::parse(last, crate::config::BATCH_BYTES_MAX).ok()?;
    Some(header.last_offset() + 1)
}

/// One disk read of `read_written`: what was asked, and the segment and bytes it reads.
struct WrittenRead {
    offset: i64,
    max_bytes: usize,
    first_try: bool,
    path: PathBuf,
    base_offset: i64,
    start_position: u64,
    end_position: u64,
    /// The active segment, read only up to its written end (a batch may be cut there).
    capped: bool,
}

impl<S: Storage> PartitionLog<S> {
    /// Reads whole batches starting with the one holding `offset`, up to `max_bytes` (at least
    /// one batch, so a reader always makes progress).
    pub async fn read(&self, offset: i64, max_bytes: usize) -> Result<LogRead> {
        let (log_start, log_end, offline) = {
            let state = self.state.borrow();
            if state.closed && state.offline {
                return Err(StorageError::Offline(self.dir.clone()));
            }
            if state.closed {
                return Err(StorageError::Closed(self.dir.clone()));
            }
            (state.log_start_offset, state.visible_end(), state.offline)
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
        let cached = self.cache.borrow().read(self.cache_key, offset, max_bytes);
        if let Some(batches) = cached {
            read.batches = batches;
            read.from_cache = true;
        } else {
            read.batches = self.read_from_disk(offset, max_bytes).await?;
        }
        // Past the visible end (a failed append of an offline log) nothing is served.
        if offline {
            read.batches.retain(|batch| {
                wire::record_batch::peek_batch(batch, crate::config::BATCH_BYTES_MAX)
                    .is_ok_and(|peek| peek.base_offset < log_end)
            });
        }
        Ok(read)
    }

    pub(crate) async fn read_from_disk(&self, offset: i64, max_bytes: usize) -> Result<Vec<Bytes>> {
        // What is on disk first: a reader behind the tail (a consumer that fell out of the
        // cache) needs none of the unwritten tail, and writing it out waits for the writes in
        // flight while it holds the partition's appends (with 4 MiB chunks, readers 2 MiB or more
        // behind stalled the writers this way: issue #13).
        if let Some(batches) = self.read_written(offset, max_bytes, true).await? {
            return Ok(batches);
        }
        {
            let _write = self.write_lock.lock().await;
            self.check_writable()?;
            let result = self.write_out_locked().await;
            self.offline_on_error(result)?;
        }
        Ok(self.read_written(offset, max_bytes, false).await?.unwrap_or_default())
    }

    /// One disk read from `offset`, of the active segment only up to its written end (an
    /// offline log's readers stop at the durable end, which was written). `first_try`: `None`
    /// when no asked batch lies wholly below the written end, so the tail must be written out
    /// (a batch cut by the written end is not damage).
    async fn read_written(
        &self,
        offset: i64,
        max_bytes: usize,
        first_try: bool,
    ) -> Result<Option<Vec<Bytes>>> {
        let Some(read) = self.locate_written(offset, max_bytes, first_try) else {
            return Ok(Some(Vec::new()));
        };
        let (base_offset, start_position, end_position) =
            (read.base_offset, read.start_position, read.end_position);
        let file = self.segment_file(base_offset).await?;
        let mut reader = match self.take_read_ahead(base_offset, offset).await {
            Some((position, chunk)) => BatchReader::with_chunk(
                &*file,
                position,
                end_position,
                base_offset,
                Some(offset),
                chunk,
            ),
            None => BatchReader::new(&*file, start_position, end_position, base_offset, None),
        };
        let Some((batches, full)) = self.take_batches(&mut reader, read).await? else {
            return Ok(None);
        };
        // A reader that took its whole budget is likely to ask for what follows: read it ahead.
        if full {
            if let Some(next_offset) = next_offset_after(&batches) {
                let disk_end = {
                    let state = self.state.borrow();
                    let active = state.segments.keys().next_back().copied();
                    if Some(base_offset) == active {
                        state.tail.written_end.min(end_position)
                    } else {
                        end_position
                    }
                };
                let position = reader.position();
                self.start_read_ahead(
                    &file,
                    base_offset,
                    position,
                    next_offset,
                    max_bytes,
                    disk_end,
                )
                .await;
            }
        }
        Ok(Some(batches))
    }

    /// Where a disk read from `offset` goes; `None` when no segment holds `offset`.
    fn locate_written(
        &self,
        offset: i64,
        max_bytes: usize,
        first_try: bool,
    ) -> Option<WrittenRead> {
        let state = self.state.borrow();
        let active_base = state.segments.keys().next_back().copied();
        let (_, segment) = state
            .segments
            .range(..=offset)
            .next_back()
            .filter(|(_, segment)| offset < segment.next_offset)?;
        let (_, position) = segment.index.lookup(segment.relative(offset));
        let capped = Some(segment.base_offset) == active_base
            && !state.offline
            && state.tail.written_end < segment.size_bytes;
        let end = if capped { state.tail.written_end } else { segment.size_bytes };
        Some(WrittenRead {
            offset,
            max_bytes,
            first_try,
            path: segment.path.clone(),
            base_offset: segment.base_offset,
            start_position: u64::from(position),
            end_position: end,
            capped,
        })
    }

    /// The asked batches from `reader` and whether the budget ended them; `None`: write out first.
    async fn take_batches(
        &self,
        reader: &mut BatchReader<'_, S::File>,
        read: WrittenRead,
    ) -> Result<Option<(Vec<Bytes>, bool)>> {
        let WrittenRead { offset, max_bytes, first_try, path, base_offset, capped, .. } = read;
        let mut batches: Vec<Bytes> = Vec::new();
        let mut total = 0usize;
        // Whether the reader's budget, not the segment's end, ended the read.
        let mut full = false;
        loop {
            reader.set_read_hint(max_bytes.saturating_sub(total));
            // At least one batch (KIP-74); then only whole batches within `max_bytes`.
            let (first, taken) = (batches.is_empty(), total);
            let next = reader.next(|size| first || taken + size <= max_bytes).await;
            match next {
                Ok(Next::Batch(batch)) => {
                    if batch.last_offset < offset {
                        continue; // before the asked offset, from the index's position
                    }
                    total += batch.bytes.len();
                    batches.push(batch.bytes);
                    if total >= max_bytes {
                        full = true;
                        break;
                    }
                }
                Ok(Next::TooLarge(_)) => {
                    full = true;
                    break;
                }
                Ok(Next::End) if capped && batches.is_empty() && first_try => return Ok(None),
                Ok(Next::End) => break,
                Err(ReadError::Io(error)) => return Err(error.into()),
                // The written end cut a batch: served up to it, or written out first.
                Err(ReadError::Invalid { .. }) if capped && first_try && batches.is_empty() => {
                    return Ok(None)
                }
                // Damage: the intact batches before it are the answer; a read that starts at it
                // gets the error (and the next fetch asks exactly there).
                Err(ReadError::Invalid { .. }) if !batches.is_empty() => break,
                Err(ReadError::Invalid { position, reason }) => {
                    let first_report =
                        self.damage_reported.borrow_mut().insert((base_offset, position));
                    return Err(StorageError::DamagedBatch {
                        path,
                        position,
                        offset,
                        reason,
                        first_report,
                    });
                }
            }
        }
        Ok(Some((batches, full)))
    }

    /// The first record with the largest timestamp in the log (ListOffsets MAX_TIMESTAMP), found
    /// from the segments' largest timestamps and then the time index; `None` for a log with no
    /// timestamped record at or after its start.
    pub async fn offset_of_max_timestamp(&self) -> Result<Option<TimestampLookup>> {
        let log_start = self.log_start_offset();
        let mut maxima: Vec<i64> = {
            let state = self.state.borrow();
            let mut bounds = state.segments.values().peekable();
            let mut maxima = Vec::new();
            while let Some(segment) = bounds.next() {
                let end = bounds.peek().map_or(i64::MAX, |next| next.base_offset);
                if end > log_start && segment.max_timestamp >= 0 {
                    maxima.push(segment.max_timestamp);
                }
            }
            maxima
        };
        // Largest first: a largest timestamp only in records below the log start (deleted
        // records) is passed over for the next one.
        maxima.sort_unstable_by(|a, b| b.cmp(a));
        maxima.dedup();
        for timestamp in maxima {
            if let Some(found) = self.offset_for_timestamp(timestamp).await? {
                if found.timestamp == timestamp {
                    return Ok(Some(found));
                }
            }
        }
        Ok(None)
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
                    let log_append_time =
                        header.timestamp_type() == wire::record_batch::TimestampType::LogAppendTime;
                    for record in wire::compression::records_of(&header)? {
                        // Under LogAppendTime every record has the batch's (broker) time.
                        let record_timestamp = if log_append_time {
                            header.max_timestamp()
                        } else {
                            header.base_timestamp() + record.timestamp_delta
                        };
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
}
