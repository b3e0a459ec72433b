//! The bytes of requests a shard holds: read (or being read) and not yet answered. Kafka's
//! `queued.max.request.bytes`, split equally between the shards.
//!
//! A connection reserves a frame's whole size, from its length prefix, before it reads the
//! body, and gives it back when the response is written; while the reservation cannot be
//! made the connection is not read (its bytes wait in the kernel, back-pressuring the client).
//! Rules, for a shard's share `capacity`, split into a general pool (`capacity - reserve`) and a
//! reserve for small frames:
//! - a frame is admitted while the general pool holds it;
//! - a small frame (at most `SMALL_REQUEST_BYTES_MAX`) that does not fit there may use the
//!   reserve, so stalled large requests never stop small requests on other connections from
//!   being read;
//! - a frame larger than the general pool is admitted when the pool is empty, alone, so every
//!   frame the broker accepts (`socket.request.max.bytes`) can be read eventually.
//!
//! So a shard holds at most `max(capacity - reserve, one frame) + reserve` bytes of requests.
//! Runs on: one shard (`Cell`s, no atomics).

use crate::stats::ShardStats;
use std::cell::Cell;
use std::rc::Rc;

/// Frames up to this size may use the reserve.
pub const SMALL_REQUEST_BYTES_MAX: u64 = 1 << 20;
/// Part of each shard's share kept for small frames (at most a quarter of the share).
pub const REQUEST_RESERVE_BYTES_MAX: u64 = 16 << 20;

pub struct RequestBudget {
    general: u64,
    reserve: u64,
    general_held: Cell<u64>,
    reserve_held: Cell<u64>,
    released: event_listener::Event,
    stats: Rc<ShardStats>,
}

/// Bytes held for one frame until dropped.
pub struct Reservation {
    budget: Rc<RequestBudget>,
    bytes: u64,
    from_reserve: bool,
}

impl RequestBudget {
    pub fn new(capacity: u64, stats: Rc<ShardStats>) -> Self {
        let reserve = (capacity / 4).min(REQUEST_RESERVE_BYTES_MAX);
        RequestBudget {
            general: capacity - reserve,
            reserve,
            general_held: Cell::new(0),
            reserve_held: Cell::new(0),
            released: event_listener::Event::new(),
            stats,
        }
    }

    /// Bytes held now, both pools.
    pub fn held(&self) -> u64 {
        self.general_held.get() + self.reserve_held.get()
    }

    /// Which pool admits `bytes` now: `Some(false)` the general one, `Some(true)` the reserve.
    fn pool_for(&self, bytes: u64) -> Option<bool> {
        let general_held = self.general_held.get();
        if general_held.saturating_add(bytes) <= self.general || general_held == 0 {
            return Some(false);
        }
        let small_fits = self.reserve_held.get().saturating_add(bytes) <= self.reserve;
        (bytes <= SMALL_REQUEST_BYTES_MAX && small_fits).then_some(true)
    }

    fn admits(&self, bytes: u64) -> bool {
        self.pool_for(bytes).is_some()
    }

    /// Reserves `bytes` at once, or `None` when the budget cannot take them now.
    pub fn try_reserve(self: &Rc<Self>, bytes: u64) -> Option<Reservation> {
        let from_reserve = self.pool_for(bytes)?;
        let pool = if from_reserve { &self.reserve_held } else { &self.general_held };
        pool.set(pool.get() + bytes);
        self.stats.set_queued_request_bytes(self.held());
        Some(Reservation { budget: self.clone(), bytes, from_reserve })
    }

    /// Reserves `bytes`, waiting until the budget admits them.
    pub async fn reserve(self: &Rc<Self>, bytes: u64) -> Reservation {
        loop {
            if let Some(reservation) = self.try_reserve(bytes) {
                return reservation;
            }
            let listener = self.released.listen();
            if self.admits(bytes) {
                continue;
            }
            listener.await;
        }
    }
}

impl Reservation {
    /// The frame bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let budget = &self.budget;
        let pool = if self.from_reserve { &budget.reserve_held } else { &budget.general_held };
        pool.set(pool.get().saturating_sub(self.bytes));
        budget.stats.set_queued_request_bytes(budget.held());
        budget.released.notify(usize::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn large_frames_stop_at_the_bound_and_small_ones_use_the_reserve() {
        let budget = Rc::new(RequestBudget::new(128 * MIB, Rc::new(ShardStats::default())));
        let first = budget.try_reserve(100 * MIB).expect("fits");
        assert!(budget.try_reserve(100 * MIB).is_none(), "a second large frame waits");
        let small: Vec<_> = (0..20).map(|_| budget.try_reserve(MIB).expect("small")).collect();
        assert_eq!(budget.held(), 120 * MIB);
        assert!(budget.try_reserve(10 * MIB).is_none(), "a medium frame may not use the reserve");
        drop(small);
        drop(first);
        assert_eq!(budget.held(), 0);
        let alone = budget.try_reserve(500 * MIB).expect("a frame larger than the share, alone");
        assert!(budget.try_reserve(2 * MIB).is_none(), "nothing else but small frames");
        let small = budget.try_reserve(MIB).expect("small frames still fit in the reserve");
        assert_eq!(budget.held(), 501 * MIB);
        drop((alone, small));
        assert_eq!(budget.held(), 0);
    }
}
