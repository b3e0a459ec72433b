//! Per-shard broker state: the partitions this shard owns, its copy of the topic metadata, and
//! its end of the cross-core mesh.
//!
//! Runs on: exactly one shard; `Rc`/`RefCell`, never shared across cores. Other shards reach the
//! partitions here only through `router` messages.

use crate::config::BrokerConfig;
use crate::metadata::{self, MetadataSnapshot};
use crate::router::{ShardMessage, ShardResponse};
use shard::io::dma::DmaStorage;
use shard::runtime::mesh::Senders;
use shard::runtime::shard_of;
use shard::{BatchCache, OpenOptions, PartitionLog};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// One partition this shard owns.
pub struct Partition {
    pub log: PartitionLog<DmaStorage>,
    /// Notified after every append, for long-polling fetches.
    pub appended: event_listener::Event,
}

pub type PartitionKey = (String, i32);

/// Counters one shard keeps about itself (read by `/metrics` through the router).
#[derive(Debug, Clone, Default)]
pub struct ShardStats {
    /// Requests served on this shard's connections, by API key.
    pub requests_by_api: std::collections::BTreeMap<i16, u64>,
    /// Requests that ended in a closed connection (bad input).
    pub connections_closed_on_error: u64,
    /// Partition requests this shard sent to another shard.
    pub routed_out: u64,
    /// Partition requests this shard handled for another shard.
    pub routed_in: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Request latency (decode to response written), microseconds, by API key.
    pub request_latency_us: std::collections::BTreeMap<i16, hdrhistogram::Histogram<u64>>,
    /// Partition-level errors returned, by Kafka error code.
    pub errors_by_code: std::collections::BTreeMap<i16, u64>,
    /// Per topic on the owning shard: (messages in, bytes in, messages out, bytes out).
    pub topic_traffic: std::collections::BTreeMap<String, [u64; 4]>,
    pub connections_open: u64,
    /// Idempotent producers' retries answered with the original offsets (not written again).
    pub duplicate_batches: u64,
    /// Records removed by log compaction, and compaction runs that rewrote something.
    pub compacted_records: u64,
    pub compaction_runs: u64,
}

impl ShardStats {
    pub fn record_latency(&mut self, api_key: i16, micros: u64) {
        self.request_latency_us
            .entry(api_key)
            .or_insert_with(shard::partition_log::latency_histogram)
            .saturating_record(micros.max(1));
    }

    pub fn count_error(&mut self, code: i16) {
        if code != 0 {
            *self.errors_by_code.entry(code).or_default() += 1;
        }
    }

    pub fn add_traffic(&mut self, topic: &str, index: usize, amount: u64) {
        if let Some(slot) = self.topic_traffic.entry(topic.to_string()).or_default().get_mut(index)
        {
            *slot += amount;
        }
    }
}

/// Partition logs opened at once per shard when a snapshot adds partitions (startup).
pub const OPEN_CONCURRENCY_MAX: usize = 64;

pub struct Shard {
    pub id: usize,
    pub count: usize,
    pub config: Arc<BrokerConfig>,
    pub metadata: RefCell<Rc<MetadataSnapshot>>,
    pub partitions: RefCell<HashMap<PartitionKey, Rc<Partition>>>,
    pub storage: DmaStorage,
    pub cache: Rc<RefCell<BatchCache>>,
    pub senders: Senders<ShardMessage>,
    pub pending: RefCell<HashMap<u64, futures_channel::oneshot::Sender<ShardResponse>>>,
    pub next_request_id: Cell<u64>,
    /// Serializes metadata changes (only used on shard 0, the metadata owner).
    pub metadata_lock: async_lock::Mutex<()>,
    pub stats: RefCell<ShardStats>,
    /// Committed offsets of the consumer groups this shard coordinates.
    pub offsets: RefCell<crate::group::OffsetTable>,
    /// Serializes commits, deletions and compactions of the offsets table.
    pub offsets_lock: async_lock::Mutex<()>,
    /// Membership of the consumer groups this shard coordinates.
    pub groups: RefCell<HashMap<String, Rc<crate::group::membership::GroupCell>>>,
    /// Client requests this shard is handling now (read, not yet answered); shutdown waits for
    /// them to drain.
    pub requests_in_progress: Cell<usize>,
    /// Producer-id allocation (used on shard 0 only).
    pub producer_ids: crate::producer_ids::ProducerIdAllocator,
    /// fdatasync durations of every partition on this shard, microseconds.
    pub sync_latency_us: Rc<RefCell<hdrhistogram::Histogram<u64>>>,
}

impl Shard {
    pub fn owner_of(&self, topic: &str, partition: i32) -> usize {
        usize::from(shard_of(topic, partition, self.count).0)
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.partitions.borrow().get(&(topic.to_string(), partition)).cloned()
    }

    pub fn snapshot(&self) -> Rc<MetadataSnapshot> {
        self.metadata.borrow().clone()
    }

    /// Opens the logs of every partition of `snapshot` this shard owns and does not hold yet,
    /// closes (and deletes the files of) the ones whose topic is gone, and applies config
    /// changes; then adopts the snapshot.
    pub async fn apply_snapshot(&self, snapshot: MetadataSnapshot) -> Result<(), String> {
        let now = shard::runtime::now_ms();
        let (mut opened_clean, mut recovered) = (0usize, 0usize);
        let mut to_open: Vec<(String, i32, shard::LogConfig)> = Vec::new();
        for topic in snapshot.topics.values() {
            let log_config = metadata::log_config(topic);
            for partition in 0..topic.partitions {
                if self.owner_of(&topic.name, partition) != self.id {
                    continue;
                }
                match self.partition(&topic.name, partition) {
                    Some(existing) => {
                        if existing.log.config() != log_config {
                            existing
                                .log
                                .set_config(log_config.clone())
                                .map_err(|e| e.to_string())?;
                        }
                    }
                    None => to_open.push((topic.name.clone(), partition, log_config.clone())),
                }
            }
        }
        // Opens are independent and mostly wait on small reads, so several run at once (with
        // thousands of partitions a sequential start takes many seconds).
        use futures_util::StreamExt;
        let mut opening =
            futures_util::stream::iter(to_open.into_iter().map(|(topic, partition, config)| {
                let dir = self.config.data_dir.join(format!("{topic}-{partition}"));
                let options = OpenOptions {
                    sync_latency_us: self.sync_latency_us.clone(),
                    config,
                    cache: self.cache.clone(),
                    now_ms: now,
                };
                let storage = self.storage.clone();
                async move {
                    PartitionLog::open(storage, &dir, options)
                        .await
                        .map(|log| (topic, partition, log))
                        .map_err(|e| format!("opening {}: {e}", dir.display()))
                }
            }))
            .buffer_unordered(OPEN_CONCURRENCY_MAX);
        while let Some(opened) = opening.next().await {
            let (topic, partition, log) = opened?;
            if log.opened_clean {
                opened_clean += 1;
            } else {
                recovered += 1;
            }
            let partition_state =
                Rc::new(Partition { log, appended: event_listener::Event::new() });
            self.partitions.borrow_mut().insert((topic, partition), partition_state);
        }
        if opened_clean + recovered > 0 {
            // `recovered` counts logs that had no clean-shutdown marker (or are new) and were
            // checked by the recovery scan.
            tracing::info!(
                shard = self.id,
                clean = opened_clean,
                recovered,
                "partition logs opened"
            );
        }
        let doomed: Vec<PartitionKey> = self
            .partitions
            .borrow()
            .keys()
            .filter(|(topic, partition)| {
                snapshot.topics.get(topic).is_none_or(|meta| *partition >= meta.partitions)
            })
            .cloned()
            .collect();
        for key in doomed {
            let removed = self.partitions.borrow_mut().remove(&key);
            if let Some(partition) = removed {
                let dir = partition.log.dir().to_path_buf();
                if let Err(error) = partition.log.close().await {
                    tracing::warn!(%error, dir = %dir.display(), "closing a deleted partition");
                }
                partition.appended.notify(usize::MAX);
                // Deleting a topic is rare; the directory removal is a short metadata operation.
                if let Err(error) = std::fs::remove_dir_all(&dir) {
                    tracing::warn!(%error, dir = %dir.display(), "removing a deleted partition");
                }
            }
        }
        *self.metadata.borrow_mut() = Rc::new(snapshot);
        Ok(())
    }
}
