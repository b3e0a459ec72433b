//! Transactions on one partition (KIP-98): markers written for the transaction coordinator,
//! the last stable offset, and the aborted transactions read_committed readers must skip.
//! The bookkeeping itself is `producer_state`'s (checked and recorded under the write lock
//! with every batch, replayed at open, rebuilt by truncation).

use super::*;
use wire::txn_marker::{marker_batch, EndTxnMarker};

impl<S: Storage> PartitionLog<S> {
    /// Appends the marker ending `producer_id`'s transaction (a control batch), stamped with
    /// `leader_epoch`; with `sync`, returns once it is durable. Refused with
    /// INVALID_PRODUCER_EPOCH for an epoch older than the producer's, and
    /// TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch than the last marker's.
    pub async fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        leader_epoch: i32,
        now_ms: i64,
        sync: bool,
    ) -> Result<AppendInfo> {
        let batch = marker_batch(producer_id, producer_epoch, marker, now_ms);
        self.append_with(BytesMut::from(&batch[..]), leader_epoch, now_ms, sync).await
    }

    /// Offsets below this are stable: no transaction below it is still open, and every
    /// closed one has its marker below the high watermark. Never above the high watermark,
    /// never below the log start (read_committed readers stop here).
    pub fn last_stable_offset(&self) -> i64 {
        let high_watermark = self.high_watermark();
        let first_unstable = self.producers.borrow_mut().first_unstable_offset(high_watermark);
        first_unstable
            .map_or(high_watermark, |first| first.min(high_watermark))
            .max(self.log_start_offset())
    }

    /// (producer id, first offset) of every aborted transaction with records in
    /// `from..upper`, for a read_committed Fetch.
    pub fn aborted_transactions(&self, from: i64, upper: i64) -> Vec<(i64, i64)> {
        self.producers.borrow().aborted_between(from, upper)
    }

    /// Transactions open on this partition.
    pub fn open_transactions(&self) -> usize {
        self.producers.borrow().open_transactions()
    }
}
