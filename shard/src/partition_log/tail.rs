//! The active segment's tail: its last, partly filled chunk, the only write buffer a partition
//! keeps between appends, drawn from the shard's write-buffer budget (`write_budget`).
//!
//! A tail's chunks start at `TAIL_CHUNK_MIN_BYTES` and double each time one fills, up to the
//! log's `write_chunk_bytes` (or `LARGE_WRITE_CHUNK_BYTES` while large batches arrive), and
//! never past the shard's fair share (`write_budget::chunk_share`), so a slowly written
//! partition holds a small chunk and a busy one large, few writes.
//! An idle log gives its buffer back (`PartitionLog::release_idle`: the tail is written out
//! first), and a log opened from disk starts without one. Either keeps only the partial last
//! page's bytes (`page`, under 4 KiB: the one fixed cost per partition), so the next append
//! needs no disk read to continue it.
//!
//! Invariant: when `buffer` is `None`, `page` holds the tail's `len` bytes, and they are on
//! disk (`written_end >= start + len`).

use super::*;
use crate::io::DMA_ALIGNMENT;
use crate::write_budget::{Held, TAIL_CHUNK_MIN_BYTES};

/// The active segment's last, partly filled chunk.
pub(crate) struct Tail<B> {
    /// File position of `buffer[0]`; page-aligned.
    pub(crate) start: u64,
    /// The chunk being filled; `None` until a byte lands in it, or once released.
    pub(crate) buffer: Option<B>,
    /// Without a buffer: the partial last page's bytes (`len` of them).
    page: Vec<u8>,
    /// The budget `buffer` is counted against.
    held: Option<Held>,
    /// Bytes of the chunk that hold data: the segment's logical end is `start + len`.
    pub(crate) len: usize,
    /// File bytes before this position are on disk (their writes completed).
    pub(crate) written_end: u64,
    /// The size of the next chunk allocated (before `write_chunk_bytes` caps it).
    chunk_bytes: usize,
    /// When an append last landed here (ms since the epoch; 0 never).
    pub(crate) last_append_ms: i64,
}

/// A chunk that filled: its file position, the buffer, and the budget it holds until written.
pub(crate) struct FullChunk<B> {
    pub(crate) position: u64,
    pub(crate) buffer: B,
    pub(crate) held: Option<Held>,
}

impl<B: IoBuffer> Tail<B> {
    /// The tail of a segment of `size` bytes, all on disk, whose partial last page holds
    /// `page` (read back by the caller): no buffer until an append.
    pub(crate) fn on_disk(size: u64, page: Vec<u8>) -> Self {
        let start = align_down(size);
        debug_assert_eq!(page.len() as u64, size - start, "the partial page");
        Tail {
            start,
            buffer: None,
            page,
            held: None,
            len: (size - start) as usize,
            written_end: size,
            chunk_bytes: TAIL_CHUNK_MIN_BYTES,
            last_append_ms: 0,
        }
    }

    /// The tail of a new, empty active segment (a roll): the chunk size carries over.
    pub(crate) fn restart(&mut self) {
        let (chunk_bytes, last_append_ms) = (self.chunk_bytes, self.last_append_ms);
        *self = Self::on_disk(0, Vec::new());
        self.chunk_bytes = chunk_bytes;
        self.last_append_ms = last_append_ms;
    }

    pub(crate) fn holds_buffer(&self) -> bool {
        self.buffer.is_some()
    }

    /// Drops the buffer (its bytes are on disk: the caller wrote the tail out), and starts
    /// the chunk size small again.
    pub(crate) fn release(&mut self) {
        debug_assert!(self.written_end >= self.start + self.len as u64, "tail not written out");
        if let Some(buffer) = self.buffer.take() {
            self.page = buffer.as_slice().get(..self.len).map(<[u8]>::to_vec).unwrap_or_default();
        }
        self.held = None;
        self.chunk_bytes = TAIL_CHUNK_MIN_BYTES;
    }

    /// The size of a chunk allocated now while `batch_bytes` are appended, `configured` being
    /// the log's `write_chunk_bytes`.
    fn next_chunk_bytes(&self, configured: usize, batch_bytes: usize) -> usize {
        let wanted = if batch_bytes >= LARGE_BATCH_BYTES {
            configured.max(LARGE_WRITE_CHUNK_BYTES)
        } else {
            self.chunk_bytes.min(configured)
        };
        wanted.min(crate::write_budget::chunk_share()).max(DMA_ALIGNMENT)
    }

    /// A new chunk buffer of `len` bytes, counted against the budget as this tail's.
    fn allocate<F: StorageFile<Buffer = B>>(&mut self, file: &F, len: usize) {
        let mut held = Held::take(len);
        held.set_tail(true);
        self.buffer = Some(file.alloc_buffer(len));
        self.held = Some(held);
    }

    /// Gives the tail a buffer again, holding its partial last page, before an append.
    pub(crate) fn refill<F: StorageFile<Buffer = B>>(&mut self, file: &F, configured: usize) {
        if self.buffer.is_some() || self.len == 0 {
            return;
        }
        let page = std::mem::take(&mut self.page);
        let len = self.next_chunk_bytes(configured, 0).max(align_up(page.len() as u64) as usize);
        self.allocate(file, len);
        let buffer = self.buffer.as_mut().map(IoBuffer::as_mut_slice);
        if let Some(prefix) = buffer.and_then(|buffer| buffer.get_mut(..page.len())) {
            prefix.copy_from_slice(&page);
        }
    }

    /// Copies appended bytes into the tail's chunks; returns the chunks that filled up, for the
    /// caller to submit.
    pub(crate) fn copy_in<F: StorageFile<Buffer = B>>(
        &mut self,
        file: &F,
        bytes: &[u8],
        configured: usize,
    ) -> Vec<FullChunk<B>> {
        debug_assert!(
            self.buffer.is_some() || self.len == 0,
            "the partial page is read back first"
        );
        let mut full = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.buffer.is_none() {
                let len = self.next_chunk_bytes(configured, bytes.len());
                self.allocate(file, len);
            }
            let Some(buffer) = self.buffer.as_mut() else { break };
            let capacity = buffer.as_slice().len();
            let take = (capacity - self.len).min(rest.len());
            let (now, later) = rest.split_at(take);
            if let Some(target) = buffer.as_mut_slice().get_mut(self.len..self.len + take) {
                target.copy_from_slice(now);
            }
            self.len += take;
            rest = later;
            if self.len == capacity {
                if let Some(chunk) = self.buffer.take() {
                    let mut held = self.held.take();
                    if let Some(held) = held.as_mut() {
                        held.set_tail(false);
                    }
                    full.push(FullChunk { position: self.start, buffer: chunk, held });
                }
                self.start += capacity as u64;
                self.len = 0;
                // Still writing: the next chunk may be larger.
                self.chunk_bytes = (self.chunk_bytes * 2).min(configured.max(TAIL_CHUNK_MIN_BYTES));
            }
        }
        full
    }
}

/// Reads the partial last page of a segment of `size` bytes (for `Tail::on_disk`).
pub(crate) async fn read_partial_page<F: StorageFile>(
    file: &F,
    size: u64,
    dir: &Path,
) -> Result<Vec<u8>> {
    let start = align_down(size);
    let len = (size - start) as usize;
    if len == 0 {
        return Ok(Vec::new());
    }
    let read = file.read_at(start, len).await?;
    if read.as_ref().len() != len {
        return Err(StorageError::Corrupt {
            path: dir.to_path_buf(),
            reason: "tail page short".into(),
        });
    }
    Ok(read.as_ref().to_vec())
}

impl<S: Storage> PartitionLog<S> {
    /// When an append last landed in this log (ms; 0 never since open).
    pub fn last_append_ms(&self) -> i64 {
        self.state.borrow().tail.last_append_ms
    }

    /// Whether the log holds a write buffer, or disk reserved ahead that `release_idle` would
    /// give back.
    pub fn holds_idle_resources(&self) -> bool {
        self.state.borrow().tail.holds_buffer()
            || self.preallocated_ahead_bytes() > PREALLOCATE_STEP_MIN
    }

    /// Gives back what an idle log holds: writes its tail out and drops the buffer, and trims
    /// the disk reserved past the active segment's end. Skips (false) a log that is writing,
    /// closed or offline. A failed write takes the log offline, as any write does.
    pub async fn release_idle(&self) -> Result<bool> {
        let Some(_write) = self.write_lock.try_lock() else { return Ok(false) };
        if self.check_writable().is_err() || !self.holds_idle_resources() {
            return Ok(false);
        }
        let result = async {
            self.write_out_locked().await?;
            self.state.borrow_mut().tail.release();
            self.trim_reservation_locked().await
        }
        .await;
        if let Err(error) = self.offline_on_error(result) {
            self.cut_back_locked().await;
            return Err(error);
        }
        Ok(true)
    }

    /// Frees the blocks reserved past the active segment's written end (truncating a file to
    /// its own length releases them on ext4 and xfs). Caller holds `write_lock`, with the tail
    /// written out.
    async fn trim_reservation_locked(&self) -> Result<()> {
        let (base, end, reserved) = {
            let state = self.state.borrow();
            let active = state.active();
            (active.base_offset, align_up(active.size_bytes), active.preallocated_end)
        };
        if reserved <= end + PREALLOCATE_STEP_MIN {
            return Ok(());
        }
        let file = self.segment_file(base).await?;
        let size = file.size().await?;
        file.truncate(size.max(end)).await?;
        let mut state = self.state.borrow_mut();
        state.preallocation.reset();
        if let Some(active) = state.segments.get_mut(&base) {
            active.preallocated_end = size.max(end);
        }
        Ok(())
    }
}
