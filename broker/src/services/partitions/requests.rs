//! The partition service's requests, each with the type of its answer (`mesh::Ask`), and how
//! the service answers them (`mesh::Answers`).

use super::txn_markers::MarkerSpec;
use super::{replica, AppendResult, Batches, PartitionService, ProducerSummary, ReadResult};
use crate::error::Result;
use crate::mesh::{answers, Ask};
use wire::ids::{NodeId, Offset, TopicPartition};

/// A produce request's records for the partitions this shard owns (one message per owner
/// shard per request), split into batches checked once by the produce handler; `sync` is
/// acks=all. Answered per partition, in the same order.
pub struct Append {
    pub partitions: Vec<(TopicPartition, Batches)>,
    pub sync: bool,
    /// The produce request's `timeout_ms`: how long acks=all waits for the ISR.
    pub timeout_ms: u64,
    /// The producer's transactional id: its transactional batches are verified (KIP-890).
    pub transactional_id: Option<String>,
}

impl Ask for Append {
    type Answer = Vec<Result<AppendResult>>;
}

answers!(PartitionService, Append, |service, append| {
    let transactional_id = append.transactional_id.as_deref();
    service.append_all(append.partitions, append.sync, append.timeout_ms, transactional_id).await
});

/// A consumer's read of one partition.
pub struct Read {
    pub partition: TopicPartition,
    pub offset: Offset,
    pub max_bytes: usize,
    /// isolation_level 1: stop at the last stable offset and list aborted transactions.
    pub read_committed: bool,
}

impl Ask for Read {
    type Answer = Result<ReadResult>;
}

answers!(PartitionService, Read, |service, read| {
    service.read(&read.partition, read.offset, read.max_bytes, read.read_committed).await
});

/// A follower's fetch (Kafka's replica Fetch): see `PartitionService::replica_read`.
pub struct ReplicaRead {
    pub partition: TopicPartition,
    pub replica: NodeId,
    pub offset: Offset,
    pub last_fetched_epoch: i32,
    /// What the follower has synced (at most `offset`).
    pub durable_end: Offset,
    pub max_bytes: usize,
}

impl Ask for ReplicaRead {
    type Answer = Result<ReadResult>;
}

answers!(PartitionService, ReplicaRead, |service, read| {
    let fetch = replica::ReplicaFetch {
        replica: read.replica,
        offset: read.offset,
        last_fetched_epoch: read.last_fetched_epoch,
        durable_end: read.durable_end,
    };
    service.replica_read(&read.partition, fetch, read.max_bytes).await
});

/// ListOffsets: -2 earliest, -1 latest, or the first offset at or after a timestamp.
pub struct ListOffset {
    pub partition: TopicPartition,
    pub timestamp: i64,
    pub read_committed: bool,
}

impl Ask for ListOffset {
    /// (offset, timestamp, leader epoch), or `None` when no record is at or after the
    /// timestamp.
    type Answer = Result<Option<(Offset, i64, i32)>>;
}

answers!(PartitionService, ListOffset, |service, list| {
    service.list_offset(&list.partition, list.timestamp, list.read_committed).await
});

/// OffsetForLeaderEpoch: where `requested` ends, `current` being the partition's leader
/// epoch in the metadata.
pub struct EpochEndOffset {
    pub partition: TopicPartition,
    pub requested: i32,
    pub current: i32,
}

impl Ask for EpochEndOffset {
    /// (epoch, end offset); (-1, -1) for an undefined epoch.
    type Answer = Result<(i32, i64)>;
}

answers!(PartitionService, EpochEndOffset, |service, asked| {
    let current = Some(asked.current).filter(|current| *current >= 0);
    service
        .owned(&asked.partition)
        .map(|owned| owned.log.end_offset_for_epoch(asked.requested, current))
});

/// Moves the log start to `offset` (-1: the high watermark).
pub struct DeleteRecords {
    pub partition: TopicPartition,
    pub offset: Offset,
}

impl Ask for DeleteRecords {
    /// The new log start.
    type Answer = Result<Offset>;
}

answers!(PartitionService, DeleteRecords, |service, delete| {
    service.delete_records(&delete.partition, delete.offset).await
});

/// The partition's active idempotent producers (DescribeProducers).
pub struct Producers {
    pub partition: TopicPartition,
}

impl Ask for Producers {
    type Answer = Result<Vec<ProducerSummary>>;
}

answers!(PartitionService, Producers, |service, asked| {
    service.owned(&asked.partition).map(|owned| owned.log.active_producers())
});

/// Writes a transaction marker (for the transaction coordinator) as an acks=all append.
pub struct WriteMarker {
    pub partition: TopicPartition,
    pub marker: MarkerSpec,
}

impl Ask for WriteMarker {
    type Answer = Result<()>;
}

answers!(PartitionService, WriteMarker, |service, write| {
    service.write_marker(&write.partition, write.marker).await
});

/// (partition, bytes on disk) of every partition this shard owns.
pub struct Sizes;

impl Ask for Sizes {
    type Answer = Vec<(TopicPartition, u64)>;
}

answers!(PartitionService, Sizes, |service, _sizes| service.sizes());

/// (partition, log start, log end) of every partition this shard owns.
pub struct Offsets;

impl Ask for Offsets {
    type Answer = Vec<(TopicPartition, i64, i64)>;
}

answers!(PartitionService, Offsets, |service, _offsets| service.offsets());
