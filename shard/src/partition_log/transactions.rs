//! Transactions on one partition (KIP-98): the last stable offset, and the aborted
//! transactions read_committed readers must skip. Markers (`wire::txn_marker`) are appended as
//! any batch; the producer state checks and records them.
//! The bookkeeping itself is `producer_state`'s (checked and recorded under the write lock
//! with every batch, replayed at open, rebuilt by truncation).

use super::*;

impl<S: Storage> PartitionLog<S> {
    /// Offsets below this are stable: no transaction below it is still open, and every
    /// closed one has its marker below the high watermark. Never above the high watermark,
    /// never below the log start (read_committed readers stop here).
    pub fn last_stable_offset(&self) -> i64 {
        let high_watermark = self.high_watermark();
        let first_unstable = self.producers.borrow_mut().first_unstable_offset(high_watermark);
        let stable = first_unstable
            .map_or(high_watermark, |first| first.min(high_watermark))
            .max(self.log_start_offset());
        // Invariant: log start <= last stable offset <= high watermark.
        assert!(
            stable <= high_watermark,
            "last stable offset {stable} past the HW {high_watermark}"
        );
        stable
    }

    /// (producer id, first offset) of every aborted transaction with records in
    /// `from..upper`, for a read_committed Fetch.
    pub fn aborted_transactions(&self, from: i64, upper: i64) -> Vec<(i64, i64)> {
        self.producers.borrow().aborted_between(from, upper)
    }

    /// Whether `producer_id`, at `epoch`, has a transaction open on this partition (a later
    /// transactional batch of it needs no verification with its coordinator, KIP-890).
    pub fn producer_in_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers
            .borrow()
            .get(producer_id)
            .is_some_and(|entry| entry.epoch == epoch && entry.txn_first_offset.is_some())
    }

    /// Transactions open on this partition.
    pub fn open_transactions(&self) -> usize {
        self.producers.borrow().open_transactions()
    }
}
