//! The shard's write-buffer budget: the memory every partition's write-behind buffers (its tail
//! chunk and the chunk writes in flight) draw from, one pool per shard instead of a cost per
//! partition.
//!
//! Issue #38: a tail chunk (1-4 MiB) and up to `WRITE_WINDOW` writes in flight per busy
//! partition put 5.5 GB in memory at 1,000 partitions. Now:
//! - every chunk buffer is counted here while it lives (`Held`, given back when the buffer is
//!   dropped: the write completed, or an idle tail was released);
//! - an append waits for room before it takes its log's write lock (`room`) while the shard is
//!   over its budget: back-pressure, not growth. Waiting holds no lock, so whoever frees memory
//!   (completing writes, the partition service releasing idle tails) is never blocked by it;
//! - the partition service releases the tails of partitions that stopped writing
//!   (`PartitionLog::release_idle`), and under pressure those written least recently first;
//! - a log's tail chunks start at `TAIL_CHUNK_MIN_BYTES` and double as they fill, up to the
//!   configured chunk size, and never past a fair share of the budget (`chunk_share`: half the
//!   budget over the tails holding a buffer), so thousands of written partitions each hold a
//!   small one and the budget is spent on writes, not on partly filled tails. Measured at
//!   1,000 partitions without the share (chunks growing to 1 MiB): 37,623 appends waited and
//!   the node wrote 275 MB/s, the budget held by tails that no write would free.
//!
//! The count may pass the budget by the chunks of the appends already admitted (each at most
//! its batch's chunks), never by a cost per partition.
//!
//! Runs on: one shard (thread-local, like the read-ahead budget).

use std::cell::Cell;

/// The size a log's tail chunks start at.
pub const TAIL_CHUNK_MIN_BYTES: usize = 64 << 10;
/// The smallest chunk a fair share comes to.
pub const CHUNK_SHARE_MIN_BYTES: usize = 16 << 10;
/// The budget of a shard that was not configured (tests; the broker sets
/// `log.write.buffer.bytes`).
pub const WRITE_BUFFER_BYTES_DEFAULT: usize = 128 << 20;

struct Budget {
    bytes_max: Cell<usize>,
    held: Cell<usize>,
    /// Tails holding a buffer (partitions with a buffer).
    tails: Cell<usize>,
    /// Appends that waited for room, since start.
    waits: Cell<u64>,
    /// Appends waiting now.
    waiting: Cell<usize>,
    /// Woken when memory is given back.
    released: event_listener::Event,
    /// Woken when an append starts waiting (the partition service then releases idle tails).
    pressed: event_listener::Event,
}

thread_local! {
    static BUDGET: Budget = const { Budget {
        bytes_max: Cell::new(WRITE_BUFFER_BYTES_DEFAULT),
        held: Cell::new(0),
        tails: Cell::new(0),
        waits: Cell::new(0),
        waiting: Cell::new(0),
        released: event_listener::Event::new(),
        pressed: event_listener::Event::new(),
    } };
}

/// Sets this shard's budget (once at startup; `0` is taken as the default).
pub fn configure(bytes_max: usize) {
    let bytes_max = if bytes_max == 0 { WRITE_BUFFER_BYTES_DEFAULT } else { bytes_max };
    BUDGET.with(|budget| budget.bytes_max.set(bytes_max));
}

/// Bytes of write buffers counted against the budget, while it lives.
#[derive(Debug)]
pub struct Held {
    bytes: usize,
    tail: bool,
}

impl Held {
    /// Counts `bytes` now (never waits: admission is `room`'s job).
    pub(crate) fn take(bytes: usize) -> Held {
        BUDGET.with(|budget| budget.held.set(budget.held.get() + bytes));
        Held { bytes, tail: false }
    }

    /// Marks these bytes as a partition's tail buffer (counted in `Snapshot::tails`) or not.
    pub(crate) fn set_tail(&mut self, tail: bool) {
        if self.tail != tail {
            BUDGET.with(|budget| {
                let tails = budget.tails.get();
                budget.tails.set(if tail { tails + 1 } else { tails.saturating_sub(1) });
            });
            self.tail = tail;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.set_tail(false);
        BUDGET.with(|budget| {
            budget.held.set(budget.held.get().saturating_sub(self.bytes));
            if budget.held.get() < budget.bytes_max.get() {
                budget.released.notify(usize::MAX);
            }
        });
    }
}

fn over() -> bool {
    BUDGET.with(|budget| budget.held.get() >= budget.bytes_max.get())
}

/// Waits while the shard's write buffers are at or over the budget (back-pressure). Call
/// holding no lock.
pub async fn room() {
    if !over() {
        return;
    }
    BUDGET.with(|budget| {
        budget.waits.set(budget.waits.get() + 1);
        budget.waiting.set(budget.waiting.get() + 1);
        budget.pressed.notify(usize::MAX);
    });
    let _waiting = Waiting;
    loop {
        let listener = BUDGET.with(|budget| budget.released.listen());
        if !over() {
            return;
        }
        listener.await;
    }
}

struct Waiting;

impl Drop for Waiting {
    fn drop(&mut self) {
        BUDGET.with(|budget| budget.waiting.set(budget.waiting.get().saturating_sub(1)));
    }
}

/// Whether appends are waiting for room now.
pub fn under_pressure() -> bool {
    BUDGET.with(|budget| budget.waiting.get() > 0 || budget.held.get() >= budget.bytes_max.get())
}

/// The largest chunk a tail may allocate now: half the budget shared by the tails holding a
/// buffer (and the one asking), rounded down to a power of two, at least
/// `CHUNK_SHARE_MIN_BYTES`.
pub fn chunk_share() -> usize {
    BUDGET.with(|budget| {
        let share = budget.bytes_max.get() / 2 / (budget.tails.get() + 1);
        let rounded = if share == 0 { 0 } else { 1 << share.ilog2() };
        rounded.max(CHUNK_SHARE_MIN_BYTES)
    })
}

/// Whether the write buffers hold over three quarters of the budget (the partition service
/// releases tails under pressure until they do not).
pub fn above_low_water() -> bool {
    BUDGET.with(|budget| budget.held.get() > budget.bytes_max.get() / 4 * 3)
}

/// Resolves when an append starts waiting for room (or at once if one is waiting).
pub async fn pressed() {
    let listener = BUDGET.with(|budget| budget.pressed.listen());
    if under_pressure() {
        return;
    }
    listener.await;
}

/// The budget's state, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub bytes_max: u64,
    pub bytes_held: u64,
    /// Partitions whose tail holds a buffer.
    pub tails: u64,
    /// Appends that waited for room, since start.
    pub waits: u64,
}

pub fn snapshot() -> Snapshot {
    BUDGET.with(|budget| Snapshot {
        bytes_max: budget.bytes_max.get() as u64,
        bytes_held: budget.held.get() as u64,
        tails: budget.tails.get() as u64,
        waits: budget.waits.get(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_bytes_are_counted_until_dropped_and_room_waits_while_over() {
        std::thread::spawn(|| {
            configure(1 << 20);
            let mut first = Held::take(768 << 10);
            first.set_tail(true);
            assert_eq!(snapshot().tails, 1);
            assert!(!under_pressure());
            let second = Held::take(512 << 10);
            assert!(under_pressure(), "over the budget");
            let waiter = std::cell::Cell::new(false);
            futures_lite::future::block_on(async {
                let wait = async {
                    room().await;
                    waiter.set(true);
                };
                let release = async {
                    futures_lite::future::yield_now().await;
                    assert!(!waiter.get(), "waits while over");
                    drop(second);
                };
                futures_lite::future::zip(wait, release).await;
            });
            assert!(waiter.get(), "room once memory was given back");
            assert_eq!(snapshot().waits, 1);
            drop(first);
            assert_eq!(
                snapshot(),
                Snapshot { bytes_max: 1 << 20, bytes_held: 0, tails: 0, waits: 1 }
            );
        })
        .join()
        .unwrap();
    }
}
