//! Share partitions (KIP-932) on the partition leader: for each share group reading a topic
//! partition this shard leads, which records are in flight to which member (`state`), and the
//! ShareFetch and ShareAcknowledge work on them: apply acknowledgements, read the log from the
//! group's next fetch offset, acquire, and answer the batches that hold acquired records.
//!
//! A share partition is made on the first fetch of its group, starting where the group's
//! `share.auto.offset.reset` says (latest by default; earliest; or by_duration, the first
//! offset at or after now minus the duration). Its limits come from the group's configs
//! (`share.record.lock.duration.ms`, `share.delivery.count.limit`,
//! `share.partition.max.record.locks`), read again at each fetch. A read_committed group
//! (`share.isolation.level`) reads up to the last stable offset, and the records of aborted
//! transactions are archived as they are met, never delivered. Transaction markers are never
//! delivered either.
//!
//! Durability: the delivery state is kept on the leader's shard only (the share-group state
//! topic is not built yet, see ARCHITECTURE.md); a share partition whose leadership leaves this
//! shard is dropped, and a new leader starts it again from `share.auto.offset.reset`.
//! Invariants: a share partition exists only for a partition this shard leads; every step
//! leaves `SharePartition::check` true.
//! Runs on: every shard, for the partitions it leads.

pub mod requests;
pub mod state;

use crate::clock::Clock;
use crate::error::{BrokerError, Result};
use crate::mesh::Service;
use crate::metadata::group_config;
use crate::services::metadata::MetadataView;
use crate::services::partitions::PartitionService;
use crate::stats::{ShardStats, ShareCounts};
use bytes::Bytes;
use shard::io::Storage;
use state::{AckError, AckType, Acquired, Limits, LogBatch, SharePartition};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;
use wire::ids::{Offset, TopicPartition};
use wire::record_batch::RecordBatchHeader;

/// How often lock deadlines are checked.
pub const SHARE_TICK_MS: u64 = 100;
/// The bytes one partition's share fetch reads at most (strata; ShareFetch's MaxBytes bounds
/// the whole response).
pub const PARTITION_READ_BYTES_MAX: usize = 1 << 20;

/// One acknowledgement range of a request: offsets and their types (one for all, or one per
/// offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckRange {
    pub first_offset: i64,
    pub last_offset: i64,
    pub types: Vec<AckType>,
}

/// What a fetch asks of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    pub max_records: usize,
    pub max_bytes: usize,
}

/// The answer for one partition.
#[derive(Debug, Default)]
pub struct PartitionAnswer {
    /// The acknowledgements' error, if they were refused (all of them).
    pub ack_error: Option<BrokerError>,
    /// The batches that hold acquired records, in offset order.
    pub batches: Vec<Bytes>,
    pub acquired: Vec<Acquired>,
    /// The group's lock duration on this partition.
    pub lock_ms: i64,
    /// Nothing could be acquired: a long poll waits for the high watermark to pass this.
    pub wait_offset: Option<i64>,
}

type Key = (String, TopicPartition);

pub struct ShareService<S: Storage> {
    partitions: Rc<PartitionService<S>>,
    stats: Rc<ShardStats>,
    clock: Clock,
    view: Rc<MetadataView>,
    shares: RefCell<HashMap<Key, Rc<RefCell<SharePartition>>>>,
    /// Released records: a waiting fetch of the same group may take them.
    released: event_listener::Event,
}

impl<S: Storage> ShareService<S> {
    pub fn new(
        partitions: Rc<PartitionService<S>>,
        stats: Rc<ShardStats>,
        clock: Clock,
        view: Rc<MetadataView>,
    ) -> Self {
        ShareService {
            partitions,
            stats,
            clock,
            view,
            shares: RefCell::new(HashMap::new()),
            released: event_listener::Event::new(),
        }
    }

    /// A group's configs on share partitions, with Kafka's defaults.
    fn group_settings(&self, group: &str) -> (Limits, String, bool) {
        let image = self.view.current();
        let overrides = image.group_configs.get(group);
        let value = |name: &str| group_config::value_of(overrides, name, &|_| None);
        let number = |name: &str, default: i64| {
            value(name).and_then(|v| v.parse::<i64>().ok()).unwrap_or(default)
        };
        let defaults = Limits::default();
        let limits = Limits {
            delivery_count_limit: number(
                "share.delivery.count.limit",
                i64::from(defaults.delivery_count_limit),
            )
            .clamp(1, i64::from(i16::MAX)) as i16,
            lock_ms: number("share.record.lock.duration.ms", defaults.lock_ms),
            record_locks_max: number("share.partition.max.record.locks", defaults.record_locks_max),
        };
        let reset = value("share.auto.offset.reset").unwrap_or_else(|| "latest".into());
        let read_committed = value("share.isolation.level").as_deref() == Some("read_committed");
        (limits, reset, read_committed)
    }

    /// The group's share partition, made from `share.auto.offset.reset` on its first use.
    async fn share_partition(
        &self,
        group: &str,
        partition: &TopicPartition,
        limits: Limits,
        reset: &str,
        read_committed: bool,
    ) -> Result<Rc<RefCell<SharePartition>>> {
        let key = (group.to_string(), partition.clone());
        if let Some(share) = self.shares.borrow().get(&key).cloned() {
            share.borrow_mut().set_limits(limits);
            return Ok(share);
        }
        let start = self.start_offset(partition, reset, read_committed).await?;
        let made = self
            .shares
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| Rc::new(RefCell::new(SharePartition::new(start, limits))))
            .clone();
        Ok(made)
    }

    /// Where a group with no state on `partition` starts (`share.auto.offset.reset`).
    async fn start_offset(
        &self,
        partition: &TopicPartition,
        reset: &str,
        read_committed: bool,
    ) -> Result<i64> {
        let timestamp = match reset {
            "earliest" => -2,
            "latest" => -1,
            by_duration => match group_config::duration_ms(by_duration) {
                Some(ms) => self.clock.now_ms().saturating_sub(ms).max(0),
                None => -1,
            },
        };
        let found = self.partitions.list_offset(partition, timestamp, read_committed).await?;
        match found {
            Some((offset, _, _)) if offset.0 >= 0 => Ok(offset.0),
            // No record at or after the time: the end.
            _ => {
                let end = self.partitions.list_offset(partition, -1, read_committed).await?;
                Ok(end.map_or(0, |(offset, _, _)| offset.0.max(0)))
            }
        }
    }

    /// ShareFetch's and ShareAcknowledge's work on one partition: the acknowledgements, then
    /// (with `fetch`) an acquisition.
    pub async fn fetch(
        &self,
        group: &str,
        member: &str,
        partition: &TopicPartition,
        acks: &[AckRange],
        fetch: Option<FetchLimits>,
    ) -> Result<PartitionAnswer> {
        let local = self.partitions.leader_of(partition)?;
        let (limits, reset, read_committed) = self.group_settings(group);
        let share = self.share_partition(group, partition, limits, &reset, read_committed).await?;
        share.borrow_mut().log_starts_at(local.log.log_start_offset());
        let mut answer = PartitionAnswer { lock_ms: limits.lock_ms, ..PartitionAnswer::default() };
        if !acks.is_empty() {
            answer.ack_error = self.acknowledge(&share, member, acks).err();
        }
        let Some(fetch) = fetch else { return Ok(answer) };
        let Some(from) = share.borrow().next_fetch_offset() else { return Ok(answer) };
        let max_bytes = fetch.max_bytes.clamp(1, PARTITION_READ_BYTES_MAX);
        let read =
            match self.partitions.read(partition, Offset(from), max_bytes, read_committed).await {
                Ok(read) => read,
                // Deleted under the read: the next fetch starts past it.
                Err(BrokerError::Storage(shard::StorageError::OffsetOutOfRange { .. })) => {
                    share.borrow_mut().log_starts_at(local.log.log_start_offset());
                    return Ok(answer);
                }
                Err(error) => return Err(error),
            };
        let batches = log_batches(&read.batches, read.aborted.as_deref());
        let now_ms = self.clock.now_ms();
        let (acquired, holding) = {
            let mut share = share.borrow_mut();
            let taken = share.acquire(member, &batches, fetch.max_records, now_ms);
            share.check();
            taken
        };
        if acquired.is_empty() {
            answer.wait_offset = Some(share.borrow().end());
        }
        let mut counts = ShareCounts::default();
        for run in &acquired {
            let records = (run.last_offset - run.first_offset + 1) as u64;
            counts.acquired += records;
            if run.delivery_count > 1 {
                counts.redelivered += records;
            }
        }
        self.stats.share_records(counts);
        answer.batches =
            holding.into_iter().filter_map(|index| read.batches.get(index).cloned()).collect();
        answer.acquired = acquired;
        Ok(answer)
    }

    fn acknowledge(
        &self,
        share: &RefCell<SharePartition>,
        member: &str,
        acks: &[AckRange],
    ) -> Result<()> {
        let mut share = share.borrow_mut();
        let ranges: Vec<(i64, i64, &[AckType])> = acks
            .iter()
            .map(|range| (range.first_offset, range.last_offset, range.types.as_slice()))
            .collect();
        let done = share.acknowledge_all(member, &ranges).map_err(|error| match error {
            AckError::Malformed(message) => BrokerError::InvalidRequest(message),
            AckError::NotAcquired(offset) => {
                BrokerError::Share(crate::error::ShareError::InvalidRecordState(format!(
                    "offset {offset} is not acquired by member {member}"
                )))
            }
        })?;
        share.check();
        let counts = ShareCounts {
            accepted: done.accepted,
            rejected: done.rejected + done.gaps,
            released: done.released.available + done.released.archived,
            archived_at_limit: done.released.archived,
            ..ShareCounts::default()
        };
        self.stats.share_records(counts);
        if counts.released > 0 {
            self.released.notify(usize::MAX);
        }
        Ok(())
    }

    /// Releases what `member` holds on these partitions (its share session ended).
    pub fn release_member(&self, group: &str, member: &str, partitions: &[TopicPartition]) {
        let mut counts = ShareCounts::default();
        for partition in partitions {
            let key = (group.to_string(), partition.clone());
            let Some(share) = self.shares.borrow().get(&key).cloned() else { continue };
            let released = share.borrow_mut().release_member(member);
            counts.released += released.available + released.archived;
            counts.archived_at_limit += released.archived;
        }
        self.stats.share_records(counts);
        if counts.released > 0 {
            self.released.notify(usize::MAX);
        }
    }

    /// Waits at most `wait` for released records (another member's, or a lock timeout).
    pub async fn wait_for_release(&self, wait: Duration) {
        let listener = self.released.listen();
        futures_lite::future::or(
            async {
                listener.await;
            },
            shard::runtime::sleep(wait),
        )
        .await;
    }

    /// One timer step: expired locks, and share partitions this shard no longer leads.
    pub fn tick_once(&self) {
        let now_ms = self.clock.now_ms();
        let mut counts = ShareCounts::default();
        let mut gone: Vec<Key> = Vec::new();
        for (key, share) in self.shares.borrow().iter() {
            if self.partitions.leader_of(&key.1).is_err() {
                gone.push(key.clone());
                continue;
            }
            let released = share.borrow_mut().expire_locks(now_ms);
            counts.lock_timeouts += released.available + released.archived;
            counts.released += released.available + released.archived;
            counts.archived_at_limit += released.archived;
        }
        if !gone.is_empty() {
            let mut shares = self.shares.borrow_mut();
            for key in gone {
                tracing::info!(group = %key.0, partition = %key.1, "share partition dropped: this shard no longer leads it");
                shares.remove(&key);
            }
        }
        if counts.lock_timeouts > 0 {
            self.stats.share_records(ShareCounts { released: 0, ..counts });
            self.released.notify(usize::MAX);
        }
    }

    /// The timer, forever.
    pub async fn tick(self: Rc<Self>) {
        loop {
            shard::runtime::sleep(Duration::from_millis(SHARE_TICK_MS)).await;
            self.tick_once();
        }
    }

    /// (group, partition, start offset, end offset, acquired) of every share partition here.
    pub fn summary(&self) -> Vec<(String, TopicPartition, i64, i64, u64)> {
        let shares = self.shares.borrow();
        let mut out: Vec<_> = shares
            .iter()
            .map(|((group, partition), share)| {
                let share = share.borrow();
                let (start, end) = (share.start_offset(), share.end());
                (group.clone(), partition.clone(), start, end, share.acquired_count())
            })
            .collect();
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }

    /// The groups with state on `partitions` (for tools).
    pub fn groups_of(&self, partitions: &HashSet<TopicPartition>) -> BTreeMap<String, usize> {
        let mut groups = BTreeMap::new();
        for (group, partition) in self.shares.borrow().keys() {
            if partitions.contains(partition) {
                *groups.entry(group.clone()).or_insert(0) += 1;
            }
        }
        groups
    }
}

/// The batches read, as acquiring sees them: transaction markers, and for a read_committed
/// read the batches of aborted transactions (`aborted`: producer id, first offset), are not
/// deliverable. A batch whose header cannot be read ends the list (the read stops there).
fn log_batches(batches: &[Bytes], aborted: Option<&[(i64, i64)]>) -> Vec<LogBatch> {
    let mut out = Vec::with_capacity(batches.len());
    // Producers whose aborted transaction has started by the current batch.
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut pending: Vec<(i64, i64)> = aborted.map(<[_]>::to_vec).unwrap_or_default();
    pending.sort_by_key(|(_, first)| *first);
    let mut pending = pending.into_iter().peekable();
    for bytes in batches {
        let Ok(batch) = RecordBatchHeader::parse(bytes, shard::config::BATCH_BYTES_MAX) else {
            break;
        };
        while let Some((producer, _)) = pending.next_if(|(_, first)| *first <= batch.last_offset())
        {
            aborting.insert(producer);
        }
        let aborted_batch = batch.is_transactional()
            && !batch.is_control()
            && aborting.contains(&batch.producer_id());
        if batch.is_control() {
            // The marker ends the producer's transaction.
            aborting.remove(&batch.producer_id());
        }
        out.push(LogBatch {
            base_offset: batch.base_offset(),
            last_offset: batch.last_offset(),
            deliverable: !batch.is_control() && !aborted_batch,
        });
    }
    out
}

impl<S: Storage> Service for ShareService<S> {
    const NAME: &'static str = "shares";
    const IN_PROGRESS_MAX: usize = 16_384;
}
