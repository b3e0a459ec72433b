//! Read-ahead for sequential consumers: after a disk read that filled the reader's budget, the
//! next bytes of the same segment are asked of the disk at once (submitted, not awaited), so
//! while the answer travels to the consumer and it asks again, the disk is already reading.
//! The next read that starts exactly there takes them instead of reading.
//! Bounds: one read-ahead per partition, at most `READ_AHEAD_BYTES_MAX` each, and at most
//! `READ_AHEAD_SHARD_BYTES_MAX` held by a shard's partitions together (a shard is one thread,
//! so the count is thread-local). Only bytes already on disk are read ahead (sealed segments,
//! or the active one below its written end), and any change that rewrites bytes (truncation,
//! segment deletion, compaction, an offline cut-back, close) drops the read-ahead, so a read
//! never sees bytes the log no longer holds; the batch reader checks what it serves as always.

use super::*;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;

/// The most one partition reads ahead.
pub const READ_AHEAD_BYTES_MAX: usize = 4 << 20;
/// The most a shard's partitions hold read ahead together.
pub const READ_AHEAD_SHARD_BYTES_MAX: usize = 64 << 20;

thread_local! {
    static SHARD_HELD: Cell<usize> = const { Cell::new(0) };
}

/// Bytes of the shard's read-ahead budget, given back when dropped.
pub(crate) struct Held(usize);

impl Held {
    fn take(bytes: usize) -> Option<Held> {
        SHARD_HELD.with(|held| {
            let now = held.get();
            (now + bytes <= READ_AHEAD_SHARD_BYTES_MAX).then(|| {
                held.set(now + bytes);
                Held(bytes)
            })
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        SHARD_HELD.with(|held| held.set(held.get().saturating_sub(self.0)));
    }
}

type PendingRead<R> = Pin<Box<dyn Future<Output = std::io::Result<R>>>>;

/// A read issued ahead of the next fetch.
pub(crate) struct ReadAhead<R> {
    segment_base: i64,
    /// File position of the first byte read: a batch boundary.
    position: u64,
    /// The offset of the batch that starts there.
    next_offset: i64,
    /// `PartitionLog::rewrites` when it was issued.
    generation: u64,
    read: PendingRead<R>,
    _held: Held,
}

impl<R> ReadAhead<R> {
    pub(crate) fn segment_base(&self) -> i64 {
        self.segment_base
    }
}

impl<S: Storage> PartitionLog<S> {
    /// Disk reads served from a read-ahead since open.
    pub fn read_ahead_hits(&self) -> u64 {
        self.read_ahead_hits.get()
    }

    /// Drops the read-ahead: the bytes it read may no longer be the log's. Called by every
    /// change that rewrites or removes bytes of the files (including one whose read-ahead is
    /// being awaited: that one is then not used).
    pub(crate) fn drop_read_ahead(&self) {
        self.rewrites.set(self.rewrites.get() + 1);
        self.read_ahead.borrow_mut().take();
    }

    /// The read-ahead's bytes, if one was issued for exactly (`segment_base`, `offset`):
    /// (file position, bytes). Any other read-ahead is dropped.
    pub(crate) async fn take_read_ahead(
        &self,
        segment_base: i64,
        offset: i64,
    ) -> Option<(u64, Bytes)> {
        let ahead = self.read_ahead.borrow_mut().take()?;
        if ahead.segment_base != segment_base || ahead.next_offset != offset {
            return None;
        }
        let ReadAhead { position, generation, read, _held, .. } = ahead;
        let read = read.await.ok()?;
        // A rewrite since it was issued: not necessarily the log's bytes any more.
        if self.rewrites.get() != generation {
            return None;
        }
        self.read_ahead_hits.set(self.read_ahead_hits.get() + 1);
        Some((position, Bytes::copy_from_slice(read.as_ref())))
    }

    /// Issues a read-ahead of up to `len` bytes of segment `segment_base` from `position` (the
    /// batch holding `next_offset`), within the bytes on disk (`disk_end`).
    pub(crate) async fn start_read_ahead(
        &self,
        file: &Rc<S::File>,
        segment_base: i64,
        position: u64,
        next_offset: i64,
        len: usize,
        disk_end: u64,
    ) {
        let len =
            (len.min(READ_AHEAD_BYTES_MAX) as u64).min(disk_end.saturating_sub(position)) as usize;
        if len < DISK_READ_BYTES_MIN {
            return;
        }
        self.read_ahead.borrow_mut().take(); // its budget back first
        let Some(held) = Held::take(len) else { return };
        let file = file.clone();
        let mut read: PendingRead<<S::File as StorageFile>::ReadBuffer> =
            Box::pin(async move { file.read_at(position, len).await });
        // Polling once submits the read; it completes while the shard goes on.
        let read: PendingRead<_> = match futures_lite::future::poll_once(&mut read).await {
            Some(done) => Box::pin(std::future::ready(done)),
            None => read,
        };
        let generation = self.rewrites.get();
        *self.read_ahead.borrow_mut() =
            Some(ReadAhead { segment_base, position, next_offset, generation, read, _held: held });
    }
}
