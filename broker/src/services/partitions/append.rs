//! Append on the owner shard: a produce request's records for one partition are split into
//! batches, every batch is checked (framing, CRC32C, no control or transactional batch, keys on
//! compacted topics) before any is appended, so a request is all-or-nothing, then appended in
//! order. Durability rule: with `sync` (acks=all) under `flush.policy=always` the answer waits
//! for the group-committed fdatasync that covers the batches; otherwise they are in the log.

use super::PartitionService;
use crate::error::{BrokerError, Result};
use crate::stats::Traffic;
use bytes::{Bytes, BytesMut};
use shard::io::Storage;
use shard::StorageError;
use wire::ids::{Offset, TopicPartition};
use wire::record_batch::peek_batch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    pub base_offset: Offset,
    pub log_start_offset: Offset,
}

fn invalid(error: wire::DecodeError) -> BrokerError {
    BrokerError::Storage(StorageError::InvalidBatch(error))
}

/// The request's records as whole batches (none may be cut short).
fn split_batches(records: Bytes) -> Result<Vec<Bytes>> {
    let mut batches = Vec::new();
    let mut rest = records;
    while !rest.is_empty() {
        let peek = peek_batch(&rest, shard::config::BATCH_BYTES_MAX).map_err(invalid)?;
        if peek.size_bytes > rest.len() {
            return Err(invalid(wire::DecodeError::Truncated {
                needed: peek.size_bytes,
                available: rest.len(),
            }));
        }
        batches.push(rest.split_to(peek.size_bytes));
    }
    if batches.is_empty() {
        return Err(invalid(wire::DecodeError::Truncated {
            needed: wire::BATCH_HEADER_BYTES,
            available: 0,
        }));
    }
    Ok(batches)
}

/// Checks every batch; returns the records they hold.
fn validate(topic: &str, batches: &[Bytes], compacted: bool) -> Result<u64> {
    let mut records = 0u64;
    for batch in batches {
        let header = wire::RecordBatchHeader::parse(batch, shard::config::BATCH_BYTES_MAX)
            .map_err(StorageError::from)?;
        header.verify_crc().map_err(StorageError::from)?;
        if header.is_control() {
            return Err(BrokerError::ControlBatchFromClient);
        }
        if header.is_transactional() {
            return Err(BrokerError::TransactionsUnsupported);
        }
        if compacted {
            // Kafka refuses keyless records on compacted topics (they could never be cleaned).
            // Records are streamed out of the decompressor (`wire::record_stream`): memory for
            // one key, and at most `DECOMPRESSED_BYTES_MAX` inflated.
            let mut keyless = false;
            wire::record_stream::stream_records(&header, |record| keyless |= record.key.is_none())
                .map_err(StorageError::from)?;
            if keyless {
                return Err(BrokerError::NullKeyOnCompactedTopic(topic.to_string()));
            }
        }
        records += (header.last_offset() - header.base_offset() + 1).max(0) as u64;
    }
    Ok(records)
}

impl<S: Storage> PartitionService<S> {
    pub(super) async fn append(
        &self,
        partition: &TopicPartition,
        records: Bytes,
        sync: bool,
    ) -> Result<AppendResult> {
        let owned = self.owned(partition)?;
        let batches = split_batches(records)?;
        let config = owned.log.config();
        let mut records = validate(&partition.topic, &batches, config.cleanup_compact)?;
        let sync = sync && config.flush == shard::FlushPolicy::Always;
        let now = self.clock.now_ms();
        let mut base_offset = None;
        let mut bytes = 0u64;
        for batch in batches {
            let length = batch.len() as u64;
            // The log owns its copy: the request's buffer is released with the answer.
            let info =
                owned.log.append_crc_verified(BytesMut::from(&batch[..]), 0, now, sync).await?;
            base_offset.get_or_insert(info.base_offset);
            if info.duplicate {
                // An idempotent producer's retry: already counted when it was first written.
                records -= (info.last_offset - info.base_offset + 1).max(0) as u64;
                self.stats.duplicate_batch();
            } else {
                bytes += length;
            }
        }
        self.stats.add_traffic(&partition.topic, Traffic::MessagesIn, records);
        self.stats.add_traffic(&partition.topic, Traffic::BytesIn, bytes);
        owned.notify_appended();
        Ok(AppendResult {
            base_offset: Offset(base_offset.unwrap_or(-1)),
            log_start_offset: Offset(owned.log.log_start_offset()),
        })
    }
}
