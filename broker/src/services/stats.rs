//! The stats service: a copy of one shard's counters, histograms and partition offsets, for
//! `/metrics` on shard 0 (which asks every shard over the mesh).

use crate::mesh::Answers;
use crate::mesh::{Mesh, MeshCounters, Service};
use crate::services::fetch_sessions::SharedFetchSessions;
use crate::services::groups::requests::CommittedOffsets;
use crate::services::groups::GroupService;
use crate::services::partitions::PartitionService;
use crate::services::replication::ReplicaFetchers;
use crate::services::transactions::TransactionService;
use crate::stats::{Counters, ShardStats};
use shard::io::Storage;
use std::rc::Rc;
use wire::ids::TopicPartition;

/// One shard's report.
pub struct StatsReport {
    pub counters: Counters,
    pub mesh: MeshCounters,
    /// (partition, log start, log end) of each owned partition.
    pub offsets: Vec<(TopicPartition, i64, i64)>,
    pub fsync_latency_us: hdrhistogram::Histogram<u64>,
    /// Mesh calls this shard is waiting on.
    pub pending_calls: u64,
    /// (group, partition, committed offset) of the groups this shard coordinates.
    pub committed: Vec<(String, TopicPartition, i64)>,
    /// This shard's partitions that are offline (a write failed; being reopened).
    pub offline: Vec<TopicPartition>,
    /// Partitions this shard leads whose ISR is short of their replicas, and of
    /// `min.insync.replicas`.
    pub under_replicated: u64,
    pub under_min_isr: u64,
    /// (partition, offsets behind, follower, ms since it caught up) per follower of the
    /// partitions this shard leads.
    pub follower_lags: Vec<(TopicPartition, i64, wire::ids::NodeId, i64)>,
    /// Round trips of this shard's follower fetches, microseconds.
    pub peer_round_trip_us: hdrhistogram::Histogram<u64>,
    /// Fetch sessions open on this shard, the partitions they hold, and sessions evicted.
    pub fetch_sessions: (u64, u64, u64),
    /// Transactions open on this shard's coordinator.
    pub open_transactions: u64,
    /// How long completed transactions were open, microseconds.
    pub txn_duration_us: hdrhistogram::Histogram<u64>,
    /// (partition, high watermark - last stable offset) of partitions with open transactions.
    pub lso_lags: Vec<(TopicPartition, i64)>,
    /// The shard's budgets: write buffers, segment files, disk reserved ahead.
    pub budgets: Budgets,
}

/// One shard's budgets (issue #38).
pub struct Budgets {
    pub write: shard::write_budget::Snapshot,
    pub files: shard::open_files::Snapshot,
    pub shared_syncs: shard::shared_sync::Snapshot,
    pub preallocated_bytes: u64,
}

pub struct StatsService<S: Storage> {
    stats: Rc<ShardStats>,
    partitions: Rc<PartitionService<S>>,
    groups: Rc<GroupService<S>>,
    transactions: Rc<TransactionService<S>>,
    replication: Rc<ReplicaFetchers<S>>,
    fetch_sessions: SharedFetchSessions,
    mesh: Rc<Mesh>,
}

impl<S: Storage> StatsService<S> {
    pub fn new(
        stats: Rc<ShardStats>,
        partitions: Rc<PartitionService<S>>,
        groups: Rc<GroupService<S>>,
        transactions: Rc<TransactionService<S>>,
        replication: Rc<ReplicaFetchers<S>>,
        fetch_sessions: SharedFetchSessions,
        mesh: Rc<Mesh>,
    ) -> Self {
        StatsService { stats, partitions, groups, transactions, replication, fetch_sessions, mesh }
    }

    async fn report(&self) -> StatsReport {
        let offsets = self.partitions.offsets();
        let committed = self.groups.clone().answer(CommittedOffsets).await;
        let (under_replicated, under_min_isr) = self.partitions.replication_counts();
        StatsReport {
            counters: self.stats.snapshot(),
            mesh: self.mesh.counters(),
            offsets,
            fsync_latency_us: self.partitions.sync_latency_us(),
            pending_calls: self.mesh.pending_calls() as u64,
            committed,
            offline: self.partitions.offline_partitions(),
            under_replicated,
            under_min_isr,
            follower_lags: self.partitions.follower_lags(),
            peer_round_trip_us: self.replication.round_trip_us(),
            fetch_sessions: {
                let sessions = self.fetch_sessions.borrow();
                let (open, partitions) = sessions.sizes();
                (open as u64, partitions as u64, sessions.evictions)
            },
            open_transactions: self.transactions.open_transactions() as u64,
            txn_duration_us: self.transactions.durations_us(),
            lso_lags: self.partitions.lso_lags(),
            budgets: Budgets {
                write: shard::write_budget::snapshot(),
                files: shard::open_files::snapshot(),
                shared_syncs: shard::shared_sync::snapshot(),
                preallocated_bytes: self.partitions.preallocated_bytes(),
            },
        }
    }
}

impl<S: Storage> Service for StatsService<S> {
    const NAME: &'static str = "stats";
    const IN_PROGRESS_MAX: usize = 64;
}

/// This shard's counters, for `/metrics` and `doctor`.
pub struct Report;

impl crate::mesh::Ask for Report {
    type Answer = Box<StatsReport>;
}

crate::mesh::answers!(StatsService, Report, |service, _report| Box::new(service.report().await));

/// Only the shard's counters and histograms (the console's chart sampler asks every few
/// seconds: no partition lists).
pub struct Sample;

impl crate::mesh::Ask for Sample {
    type Answer = Box<Counters>;
}

crate::mesh::answers!(StatsService, Sample, |service, _sample| Box::new(service.stats.snapshot()));
