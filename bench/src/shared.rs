//! What every producer and consumer task of a run reports into, across the load generator's
//! executors (atomics and mutexes: the bench may share across cores; the broker may not).

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// What every task reports into (the bench may share across cores; the broker may not).
pub struct Shared {
    pub produced: AtomicU64,
    pub produced_bytes: AtomicU64,
    pub consumed: AtomicU64,
    pub consumed_bytes: AtomicU64,
    /// Every record consumed, warmup included (for --messages in consume mode).
    pub consumed_all: AtomicU64,
    /// Every record acknowledged, warmup included (e2e: consumers read until they have them).
    pub produced_all: AtomicU64,
    /// Consumers that know where they start (e2e: producers wait for all of them).
    pub consumers_ready: AtomicU64,
    /// Errors that stopped a producer or consumer.
    pub errors: AtomicU64,
    pub total: Mutex<Histogram<u64>>,
    pub interval: Mutex<Histogram<u64>>,
    pub recording: AtomicBool,
    pub stop: AtomicBool,
    /// Producers that finished.
    pub producers_done: AtomicU64,
    /// Transactions committed (transactional producers).
    pub transactions: AtomicU64,
    pub first_error: Mutex<Option<String>>,
    /// e2e mode: only consumers record latency.
    pub e2e: bool,
    pub message_size: usize,
    /// Retriable errors (batches sent again, partitions fetched from a new leader), by name.
    pub retriable: Mutex<BTreeMap<String, u64>>,
    /// Partition -> the longest a failover kept it from being acknowledged (ms).
    pub stalls_ms: Mutex<BTreeMap<i32, u64>>,
}

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

pub fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or_default()
}

impl Shared {
    pub fn record(&self, micros: u64, count: u64) {
        if !self.recording.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut total) = self.total.lock() {
            total.saturating_record_n(micros.max(1), count);
        }
        if let Ok(mut interval) = self.interval.lock() {
            interval.saturating_record_n(micros.max(1), count);
        }
    }

    /// A retriable error: `code`, or `None` for a lost connection.
    pub fn retried(&self, code: Option<i16>) {
        let name = code.map_or_else(|| "connection lost".to_string(), crate::routing::error_name);
        if let Ok(mut retriable) = self.retriable.lock() {
            *retriable.entry(name).or_default() += 1;
        }
    }

    /// `partition` was acknowledged again `stall_ms` after its last acknowledgement before
    /// a failure.
    pub fn stalled(&self, partition: i32, stall_ms: u64) {
        if let Ok(mut stalls) = self.stalls_ms.lock() {
            let longest = stalls.entry(partition).or_default();
            *longest = (*longest).max(stall_ms);
        }
    }

    pub fn fail(&self, error: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = self.first_error.lock() {
            first.get_or_insert(error);
        }
    }
}
