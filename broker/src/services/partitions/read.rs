//! Reads on the owner shard: batches from an offset (Fetch) and offsets by time (ListOffsets).

use super::PartitionService;
use crate::error::{BrokerError, Result};
use crate::stats::{ShardStats, Traffic};
use bytes::Bytes;
use shard::io::Storage;
use wire::ids::{Offset, TopicPartition};
use wire::record_batch::peek_batch;

#[derive(Debug, Clone)]
pub struct ReadResult {
    pub batches: Vec<Bytes>,
    pub high_watermark: Offset,
    /// Where read_committed readers stop (KIP-98; the high watermark without transactions).
    pub last_stable_offset: Offset,
    /// A read_committed read: (producer id, first offset) of the aborted transactions with
    /// records in what it returns; `None` for read_uncommitted (Kafka sends null then).
    pub aborted: Option<Vec<(i64, i64)>>,
    pub log_start_offset: Offset,
    /// A follower's fetch only: where its log diverges from the leader's (epoch, end offset).
    pub diverging: Option<(i32, i64)>,
}

/// Counts batches sent to a consumer in its topic's `strata_topic_{messages,bytes}_out_total`,
/// on the shard that sends them (a read may be cut before it is sent: fetch's byte budget).
pub fn count_out(stats: &ShardStats, topic: &str, batches: &[Bytes]) {
    for batch in batches {
        if let Ok(peek) = peek_batch(batch, shard::config::BATCH_BYTES_MAX) {
            let records = (peek.last_offset - peek.base_offset + 1).max(0) as u64;
            stats.add_traffic(topic, Traffic::MessagesOut, records);
            stats.add_traffic(topic, Traffic::BytesOut, batch.len() as u64);
        }
    }
}

impl<S: Storage> PartitionService<S> {
    /// Reads whole batches from `offset` up to `max_bytes` (at least one), below the high
    /// watermark (the last stable offset for read_committed). Not counted as traffic out:
    /// the caller counts what it sends (`count_out`).
    pub(crate) async fn read(
        &self,
        partition: &TopicPartition,
        offset: Offset,
        max_bytes: usize,
        read_committed: bool,
    ) -> Result<ReadResult> {
        let owned = self.owned(partition)?;
        let mut read = owned.log.read(offset.0, max_bytes).await.inspect_err(|error| match error {
            shard::StorageError::OffsetOutOfRange { .. } => {}
            // Once per damaged batch (readers retry at it until it is deleted).
            shard::StorageError::DamagedBatch { first_report, .. } => {
                if *first_report {
                    tracing::error!(%partition, %error, "damaged batch on disk: served up to it");
                    self.stats.damaged_batch();
                }
            }
            _ => tracing::warn!(%partition, offset = offset.0, %error, "read failed"),
        })?;
        // Consumers read only what the in-sync replicas have (below the high watermark; on a
        // partition with one replica it is the log end, short of acks=all appends not yet
        // synced), and read_committed ones only what no
        // open transaction holds back (below the last stable offset).
        let high_watermark = owned.log.high_watermark();
        let last_stable_offset = owned.log.last_stable_offset();
        let bound = if read_committed { last_stable_offset } else { high_watermark };
        if bound < owned.log.log_end_offset() {
            read.batches.retain(|batch| {
                peek_batch(batch, shard::config::BATCH_BYTES_MAX)
                    .is_ok_and(|peek| peek.last_offset < bound)
            });
        }
        let aborted = read_committed.then(|| {
            let upper = read
                .batches
                .last()
                .and_then(|batch| peek_batch(batch, shard::config::BATCH_BYTES_MAX).ok())
                .map_or(offset.0, |peek| peek.last_offset + 1);
            owned.log.aborted_transactions(offset.0, upper)
        });
        Ok(ReadResult {
            batches: read.batches,
            high_watermark: Offset(high_watermark),
            last_stable_offset: Offset(last_stable_offset),
            aborted,
            log_start_offset: Offset(owned.log.log_start_offset()),
            diverging: None,
        })
    }

    /// The offset, its timestamp and its leader epoch (ListOffsets v4+ answers the epoch, and
    /// a client validates the offset against it with OffsetForLeaderEpoch).
    pub(crate) async fn list_offset(
        &self,
        partition: &TopicPartition,
        timestamp: i64,
        read_committed: bool,
    ) -> Result<Option<(Offset, i64, i32)>> {
        let owned = self.owned(partition)?;
        // A new leader whose high watermark has not yet reached the start of its epoch would
        // answer an offset below one a client may already have seen from the old leader:
        // OFFSET_NOT_AVAILABLE (retriable) until it has, as Kafka's
        // `Partition.fetchOffsetForTimestamp` answers.
        let role = owned.role();
        if role.leader == self.node && role.replicated() {
            let (high_watermark, epoch_start) =
                (owned.log.high_watermark(), owned.epoch_start_offset());
            if high_watermark < epoch_start {
                return Err(BrokerError::OffsetNotAvailable(format!(
                    "{partition}: the high watermark ({high_watermark}) is behind the start of \
                     leader epoch {} ({epoch_start})",
                    owned.leader_epoch()
                )));
            }
        }
        // LATEST is the last stable offset for read_committed (Kafka's isolation_level, v2+),
        // and a timestamp found at or past it is not answered.
        let bound = if read_committed {
            owned.log.last_stable_offset()
        } else {
            owned.log.high_watermark()
        };
        let found = match timestamp {
            // EARLIEST, and EARLIEST_LOCAL (KIP-1005): with no tiered storage, the same.
            -2 | -4 => Some((Offset(owned.log.log_start_offset()), -1)),
            -1 => Some((Offset(bound), -1)),
            // MAX_TIMESTAMP (KIP-734): the first record with the largest timestamp.
            -3 => Some(
                owned
                    .log
                    .offset_of_max_timestamp()
                    .await?
                    .map_or((Offset(-1), -1), |found| (Offset(found.offset), found.timestamp)),
            ),
            // LATEST_TIERED (KIP-1005): nothing is tiered, so no offset (as Kafka answers
            // without remote storage).
            -5 => Some((Offset(-1), -1)),
            timestamp if timestamp >= 0 => owned
                .log
                .offset_for_timestamp(timestamp)
                .await?
                .filter(|found| found.offset < bound)
                .map(|found| (Offset(found.offset), found.timestamp)),
            other => {
                return Err(BrokerError::InvalidRequest(format!(
                    "unsupported ListOffsets timestamp {other}"
                )))
            }
        };
        Ok(found.map(|(offset, timestamp)| (offset, timestamp, epoch_of(&owned, offset))))
    }
}

/// The leader epoch of `offset` in `partition` as Kafka answers it: the epoch of the batch
/// holding it; at or past the log end the current one (Kafka's cache has the current epoch
/// from the moment the replica leads); -1 for no offset or one before every epoch.
fn epoch_of<S: Storage>(partition: &super::Partition<S>, offset: Offset) -> i32 {
    if offset.0 < 0 {
        return -1;
    }
    if offset.0 >= partition.log.log_end_offset() {
        return partition.log.latest_epoch().unwrap_or(-1).max(partition.leader_epoch());
    }
    partition.log.epoch_at(offset.0).unwrap_or(-1)
}
