//! The per-shard cache of recently appended batches, so tailing readers do not touch the disk.
//!
//! Owns: a byte-bounded map from (partition, base offset) to the batch bytes (`Bytes`, shared
//! with nothing mutable). Eviction is oldest-inserted first across all partitions of the shard.
//!
//! Invariants: `bytes_used <= bytes_max` after every insert; an entry is exactly the bytes that
//! were appended at that offset (truncation drops the entries past the new end).
//! Runs on: the owning shard only (`Rc`, not shared across cores).

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Identifies a partition within one shard's cache.
pub type CacheKey = u64;

/// One cached batch.
#[derive(Debug, Clone)]
struct Entry {
    last_offset: i64,
    bytes: Bytes,
}

#[derive(Debug)]
pub struct BatchCache {
    bytes_max: usize,
    bytes_used: usize,
    order: VecDeque<(CacheKey, i64)>,
    partitions: HashMap<CacheKey, BTreeMap<i64, Entry>>,
    next_key: CacheKey,
}

/// The default budget per shard.
pub const BATCH_CACHE_BYTES_DEFAULT: usize = 64 << 20;

impl BatchCache {
    pub fn new(bytes_max: usize) -> Self {
        Self {
            bytes_max,
            bytes_used: 0,
            order: VecDeque::new(),
            partitions: HashMap::new(),
            next_key: 0,
        }
    }

    /// A fresh key for a newly opened partition.
    pub fn register(&mut self) -> CacheKey {
        self.next_key += 1;
        self.next_key
    }

    pub fn bytes_used(&self) -> usize {
        self.bytes_used
    }

    /// Caches one appended batch; evicts the oldest batches of the shard past the budget.
    pub fn insert(&mut self, key: CacheKey, base_offset: i64, last_offset: i64, bytes: Bytes) {
        if bytes.len() > self.bytes_max {
            return;
        }
        self.bytes_used += bytes.len();
        let previous = self
            .partitions
            .entry(key)
            .or_default()
            .insert(base_offset, Entry { last_offset, bytes });
        if let Some(previous) = previous {
            self.bytes_used -= previous.bytes.len();
        }
        self.order.push_back((key, base_offset));
        while self.bytes_used > self.bytes_max {
            let Some((old_key, old_base)) = self.order.pop_front() else { break };
            if let Some(map) = self.partitions.get_mut(&old_key) {
                if let Some(entry) = map.remove(&old_base) {
                    self.bytes_used -= entry.bytes.len();
                }
            }
        }
        assert!(self.bytes_used <= self.bytes_max);
    }

    /// Consecutive cached batches starting with the one holding `offset`, up to `max_bytes`
    /// (the first batch is returned even when larger, as Kafka does so readers make progress).
    /// `None` when the batch holding `offset` is not cached.
    pub fn read(&self, key: CacheKey, offset: i64, max_bytes: usize) -> Option<Vec<Bytes>> {
        let map = self.partitions.get(&key)?;
        let (&first_base, first) = map.range(..=offset).next_back()?;
        if first.last_offset < offset {
            return None;
        }
        let mut out = Vec::new();
        let mut total = 0;
        let mut expected_base = first_base;
        for (&base, entry) in map.range(first_base..) {
            if base != expected_base || (!out.is_empty() && total + entry.bytes.len() > max_bytes) {
                break;
            }
            total += entry.bytes.len();
            out.push(entry.bytes.clone());
            expected_base = entry.last_offset + 1;
        }
        Some(out)
    }

    /// Drops a partition's batches at or past `offset` (a truncation).
    pub fn truncate(&mut self, key: CacheKey, offset: i64) {
        if let Some(map) = self.partitions.get_mut(&key) {
            let removed = map.split_off(&offset);
            if let Some((_, entry)) = map.iter().next_back() {
                if entry.last_offset >= offset {
                    let last = map.iter().next_back().map(|(base, _)| *base);
                    if let Some(base) = last {
                        if let Some(entry) = map.remove(&base) {
                            self.bytes_used -= entry.bytes.len();
                        }
                    }
                }
            }
            self.bytes_used -= removed.values().map(|entry| entry.bytes.len()).sum::<usize>();
        }
    }

    /// Drops everything cached for a partition (close or delete).
    pub fn forget(&mut self, key: CacheKey) {
        if let Some(map) = self.partitions.remove(&key) {
            self.bytes_used -= map.values().map(|entry| entry.bytes.len()).sum::<usize>();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(len: usize) -> Bytes {
        Bytes::from(vec![7u8; len])
    }

    #[test]
    fn reads_return_consecutive_batches_within_the_budget() {
        let mut cache = BatchCache::new(1000);
        let key = cache.register();
        cache.insert(key, 0, 4, batch(100));
        cache.insert(key, 5, 9, batch(100));
        cache.insert(key, 10, 10, batch(100));
        assert_eq!(cache.read(key, 7, 1000).map(|b| b.len()), Some(2));
        assert_eq!(cache.read(key, 0, 150).map(|b| b.len()), Some(1));
        assert_eq!(cache.read(key, 0, 10).map(|b| b.len()), Some(1), "first batch always");
        assert!(cache.read(key, 11, 1000).is_none());
    }

    #[test]
    fn eviction_keeps_the_shard_under_its_budget_oldest_first() {
        let mut cache = BatchCache::new(250);
        let a = cache.register();
        let b = cache.register();
        cache.insert(a, 0, 0, batch(100));
        cache.insert(b, 0, 0, batch(100));
        cache.insert(a, 1, 1, batch(100));
        assert!(cache.bytes_used() <= 250);
        assert!(cache.read(a, 0, 1000).is_none(), "oldest evicted");
        assert!(cache.read(b, 0, 1000).is_some());
        assert!(cache.read(a, 1, 1000).is_some());
    }

    #[test]
    fn truncate_drops_batches_at_and_past_the_offset() {
        let mut cache = BatchCache::new(10_000);
        let key = cache.register();
        cache.insert(key, 0, 4, batch(100));
        cache.insert(key, 5, 9, batch(100));
        cache.insert(key, 10, 14, batch(100));
        cache.truncate(key, 7);
        assert_eq!(cache.bytes_used(), 100);
        assert!(cache.read(key, 5, 1000).is_none());
        assert!(cache.read(key, 0, 1000).is_some());
    }
}
