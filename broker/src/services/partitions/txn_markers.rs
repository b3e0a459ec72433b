//! Transaction markers on the partition leader: the control batch a transaction coordinator
//! asks for (its own shard, another shard, or another broker through WriteTxnMarkers),
//! written like an acks=all append: synced, and on a replicated partition committed by the
//! in-sync replicas before it is answered (Kafka's `appendRecords` with acks=-1, origin
//! COORDINATOR: epochs are checked, sequences are not).

use super::PartitionService;
use crate::error::{BrokerError, Result};
use shard::io::Storage;
use std::time::Duration;
use wire::ids::TopicPartition;
use wire::txn_marker::{marker_batch, EndTxnMarker};

/// How long a marker waits for the in-sync replicas.
pub const MARKER_REPLICATION_TIMEOUT: Duration = Duration::from_secs(30);

/// A marker to write: whose transaction, how it ended, and by which coordinator epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerSpec {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
}

impl<S: Storage> PartitionService<S> {
    /// (partition, high watermark - last stable offset) of this shard's partitions whose
    /// last stable offset is held back by a transaction (for `/metrics`).
    pub fn lso_lags(&self) -> Vec<(TopicPartition, i64)> {
        self.partitions
            .borrow()
            .iter()
            .filter(|(_, partition)| partition.log.open_transactions() > 0)
            .map(|(key, partition)| {
                let lag = partition.log.high_watermark() - partition.log.last_stable_offset();
                (key.clone(), lag.max(0))
            })
            .collect()
    }

    pub async fn write_marker(&self, partition: &TopicPartition, marker: MarkerSpec) -> Result<()> {
        let owned = self.owned(partition)?;
        if owned.role().leader != self.node {
            return Err(BrokerError::NotLeader(partition.to_string()));
        }
        let now = self.clock.now_ms();
        let end =
            EndTxnMarker { commit: marker.commit, coordinator_epoch: marker.coordinator_epoch };
        let batch = marker_batch(marker.producer_id, marker.producer_epoch, end, now);
        let batch = bytes::BytesMut::from(&batch[..]);
        owned
            .append_committed(partition, self.node, batch, now, MARKER_REPLICATION_TIMEOUT)
            .await?;
        Ok(())
    }
}
