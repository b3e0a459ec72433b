//! The partition data service: the partition logs this shard owns.
//!
//! Owns: each owned partition's `PartitionLog` and its append event (long polls), the shard's
//! batch cache and fsync histogram, opening the partitions a metadata image places here and
//! closing (and for deleted topics removing) the ones it no longer does, the periodic
//! maintenance (interval flushes, compaction, retention) and the clean close at shutdown.
//! Requests (`requests`, one type each): append (with Produce's batch validation), read, list offsets,
//! delete records, producer state, sizes and offsets for DescribeLogDirs and `/metrics`.
//! Invariants: only this shard touches these partitions' files; a partition is open here
//! exactly while the adopted image places it on this shard (this node, this shard).
//! Runs on: every shard, for its own partitions.

mod append;
mod idle;
mod lifecycle;
pub mod order;
mod read;
pub mod replica;
pub mod requests;
pub mod txn_markers;
pub mod txn_verify;
pub mod waits;

pub use append::{split_batches, AppendResult, Batches};
pub use read::{count_out, ReadResult};

use crate::clock::Clock;
use crate::error::{BrokerError, Result};
use crate::mesh::Service;
use crate::stats::ShardStats;
use shard::io::Storage;
use shard::runtime::ShardId;
use shard::{BatchCache, PartitionLog};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use wire::ids::{NodeId, Offset, TopicPartition};

/// Partition logs opened (or closed) at once per shard.
pub const OPEN_CONCURRENCY_MAX: usize = 64;
pub const CLOSE_CONCURRENCY_MAX: usize = 64;

/// One partition this shard owns.
pub struct Partition<S: Storage> {
    pub log: PartitionLog<S>,
    /// Notified after every append (long-polling fetches wait on it).
    appended: event_listener::Event,
    /// Appends go in the order they reached this shard (`order`).
    order: Rc<order::AppendOrder>,
    /// The partition's leader epoch in the newest image this shard adopted: stamped on every
    /// batch appended (Kafka's partitionLeaderEpoch) and recorded in the leader-epoch
    /// checkpoint when it changes.
    leader_epoch: std::cell::Cell<i32>,
    /// Leader, replicas, ISR and min.insync from the same image (`replica`).
    role: RefCell<replica::Role>,
    /// As the leader: what it knows of each follower.
    followers: RefCell<std::collections::BTreeMap<NodeId, replica::Follower>>,
    /// A background sync for the high watermark is running (`Partition::sync_behind`).
    sync_running: std::cell::Cell<bool>,
    /// An ISR change was asked of the controller and not answered yet.
    isr_change_pending: std::cell::Cell<bool>,
}

impl<S: Storage> Partition<S> {
    fn new(log: PartitionLog<S>, leader_epoch: i32, role: replica::Role) -> Self {
        Partition {
            log,
            appended: event_listener::Event::new(),
            order: Rc::default(),
            leader_epoch: std::cell::Cell::new(leader_epoch),
            role: RefCell::new(role),
            followers: RefCell::default(),
            sync_running: std::cell::Cell::new(false),
            isr_change_pending: std::cell::Cell::new(false),
        }
    }

    /// The leader epoch appends are stamped with.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.get()
    }

    pub fn notify_appended(&self) {
        self.appended.notify(usize::MAX);
    }

    /// Moves the log start to `offset` (DeleteRecords, a follower following its leader's log
    /// start) and unlinks the deleted segments' files in the background: that takes hundreds
    /// of milliseconds for large segments (`Storage::remove_gently`), which neither a client's
    /// DeleteRecords nor a follower's fetch loop should wait for.
    pub async fn delete_records_before(self: &Rc<Self>, offset: i64) -> Result<i64> {
        let log_start = self.log.delete_records_before(offset).await?;
        let partition = self.clone();
        shard::runtime::spawn(async move {
            if let Err(error) = partition.log.remove_deleted_files().await {
                tracing::warn!(dir = %partition.log.dir().display(), %error, "removing deleted segments failed");
            }
        })
        .detach();
        Ok(log_start)
    }
}

/// (producer id, epoch, last sequence, last timestamp) of one idempotent producer.
pub type ProducerSummary = shard::producer_state::ActiveProducer;

/// What the service is built from.
pub struct PartitionServiceParts<S: Storage> {
    pub shard: ShardId,
    pub node: NodeId,
    pub storage: S,
    pub data_dir: PathBuf,
    pub cache_bytes: usize,
    /// This shard's write-buffer budget (`shard::write_budget`).
    pub write_buffer_bytes: usize,
    /// This shard's segment-file cache (`shard::open_files`).
    pub segment_files_open_max: usize,
    pub stats: Rc<ShardStats>,
    pub clock: Clock,
}

pub struct PartitionService<S: Storage> {
    shard: ShardId,
    node: NodeId,
    storage: S,
    data_dir: PathBuf,
    cache: Rc<RefCell<BatchCache>>,
    sync_latency_us: Rc<RefCell<hdrhistogram::Histogram<u64>>>,
    stats: Rc<ShardStats>,
    clock: Clock,
    partitions: RefCell<HashMap<TopicPartition, Rc<Partition<S>>>>,
    /// Back-off of offline partitions whose reopening failed.
    repairs: RefCell<HashMap<TopicPartition, Repair>>,
    roles_version: std::cell::Cell<u64>,
    /// Partition verification of transactional batches (`txn_verify`); `None` when
    /// `transaction.partition.verification.enable` is off.
    txn_verifier: RefCell<Option<Rc<dyn txn_verify::TxnVerifier>>>,
}

/// When an offline partition is tried again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Repair {
    next_ms: i64,
    backoff_ms: u64,
}

/// The first retry of an offline partition waits this long (maintenance runs at most once a
/// second, so in practice the first retry comes at the next run); each failure doubles it.
pub const REPAIR_BACKOFF_MS_MIN: u64 = 500;
pub const REPAIR_BACKOFF_MS_MAX: u64 = 30_000;
/// A partition that went offline for a full disk is reopened only once its file system has this
/// much free: room for the first preallocation steps of many reopened partitions (each starts
/// at `PREALLOCATE_STEP_MIN`); sooner, their next writes would fail again.
pub const REPAIR_FREE_BYTES_MIN: u64 = 16 << 20;

impl<S: Storage> PartitionService<S> {
    /// Built on the shard it serves: the shard's budgets are set here.
    pub fn new(parts: PartitionServiceParts<S>) -> Self {
        shard::write_budget::configure(parts.write_buffer_bytes);
        shard::open_files::configure(parts.segment_files_open_max);
        PartitionService {
            shard: parts.shard,
            node: parts.node,
            storage: parts.storage,
            data_dir: parts.data_dir,
            cache: Rc::new(RefCell::new(BatchCache::new(parts.cache_bytes))),
            sync_latency_us: Rc::new(RefCell::new(shard::partition_log::latency_histogram())),
            stats: parts.stats,
            clock: parts.clock,
            partitions: RefCell::new(HashMap::new()),
            repairs: RefCell::new(HashMap::new()),
            roles_version: std::cell::Cell::new(1),
            txn_verifier: RefCell::new(None),
        }
    }

    /// This node's id.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Bumped by every adopted image (roles may have moved): services that follow leadership
    /// (groups) compare it with the last one they saw.
    pub fn roles_version(&self) -> u64 {
        self.roles_version.get()
    }

    /// A partition this shard owns and this node leads (share partitions live only there).
    pub fn leader_of(&self, partition: &TopicPartition) -> Result<Rc<Partition<S>>> {
        let owned = self.owned(partition)?;
        if owned.role().leader != self.node {
            return Err(BrokerError::NotLeader(partition.to_string()));
        }
        Ok(owned)
    }

    /// An owned partition, for the other services on this shard.
    pub fn local(&self, partition: &TopicPartition) -> Option<Rc<Partition<S>>> {
        self.partitions.borrow().get(partition).cloned()
    }

    /// Every partition of `topic` this shard leads (follower replicas are the replication
    /// fetcher's alone: nothing else may append to them).
    pub fn local_of_topic(&self, topic: &str) -> Vec<(TopicPartition, Rc<Partition<S>>)> {
        self.partitions
            .borrow()
            .iter()
            .filter(|(key, partition)| {
                key.topic == topic && partition.role.borrow().leader == self.node
            })
            .map(|(key, partition)| (key.clone(), partition.clone()))
            .collect()
    }

    pub fn owned_count(&self) -> usize {
        self.partitions.borrow().len()
    }

    /// fdatasync durations of this shard's partitions, microseconds.
    pub fn sync_latency_us(&self) -> hdrhistogram::Histogram<u64> {
        self.sync_latency_us.borrow().clone()
    }

    pub fn storage(&self) -> &S {
        &self.storage
    }

    fn owned(&self, partition: &TopicPartition) -> Result<Rc<Partition<S>>> {
        self.local(partition)
            .ok_or_else(|| BrokerError::UnknownTopicOrPartition(partition.to_string()))
    }

    /// (partition, bytes on disk) of every partition this shard owns.
    fn sizes(&self) -> Vec<(TopicPartition, u64)> {
        let partitions = self.partitions.borrow();
        partitions.iter().map(|(key, owned)| (key.clone(), owned.log.size_bytes())).collect()
    }

    /// (partition, log start, log end) of every partition this shard owns.
    pub fn offsets(&self) -> Vec<(TopicPartition, i64, i64)> {
        let partitions = self.partitions.borrow();
        partitions
            .iter()
            .map(|(key, owned)| {
                (key.clone(), owned.log.log_start_offset(), owned.log.log_end_offset())
            })
            .collect()
    }

    async fn delete_records(&self, partition: &TopicPartition, offset: Offset) -> Result<Offset> {
        let owned = self.owned(partition)?;
        let target = if offset.0 == -1 { owned.log.high_watermark() } else { offset.0 };
        Ok(Offset(owned.delete_records_before(target).await?))
    }
}

impl<S: Storage> Service for PartitionService<S> {
    const NAME: &'static str = "partitions";
    /// Appends and reads in progress for other shards; each holds at most one request's data,
    /// which `queued.max.request.bytes` already bounds.
    const IN_PROGRESS_MAX: usize = 4096;
}
