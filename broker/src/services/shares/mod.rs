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
//! Durability: acknowledgements, releases and a moved start are written to the partition's
//! share coordinator (`StateStore`: `__share_group_state`, acks=all) before a request that made
//! them is answered (lock timeouts and ended sessions by the tick); acquisitions are not
//! written. A share partition whose leadership leaves this shard is dropped, and its new
//! leader loads the written state (ARCHITECTURE.md, durability rules).
//! Invariants: a share partition exists only for a partition this shard leads; every step
//! leaves `SharePartition::check` true.
//! Runs on: every shard, for the partitions it leads.

pub mod requests;
pub mod state;

use crate::clock::Clock;
use crate::error::{BrokerError, Result, ShareError};
use crate::mesh::Service;
use crate::metadata::group_config;
use crate::services::metadata::MetadataView;
use crate::services::partitions::{Partition, PartitionService};
use crate::stats::{ShardStats, ShareCounts};
use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use shard::io::Storage;
use state::{
    AckError, AckType, Acquired, DeadLetter, Limits, LogBatch, Persisted, SharePartition, StateKey,
    Stored,
};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
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

/// What one acquisition took: the batches holding its records, its runs, and (nothing taken)
/// the offset a long poll waits past.
struct Acquisition {
    batches: Vec<Bytes>,
    acquired: Vec<Acquired>,
    wait_offset: Option<i64>,
}

type Key = (String, TopicPartition);

/// Where share partitions' state is kept: the share coordinators (implemented by
/// `routers::ShareStateRouter`, which knows where they are).
pub trait StateStore {
    /// The persisted state of `key` (None: never initialized), read at `leader_epoch`.
    fn read(
        &self,
        key: StateKey,
        leader_epoch: i32,
    ) -> LocalBoxFuture<'static, Result<Option<Stored>>>;
    /// Writes `state` for `key`, whose state is at `state_epoch` (`initialize`: its first).
    fn write(
        &self,
        key: StateKey,
        leader_epoch: i32,
        state_epoch: i32,
        state: Persisted,
        initialize: bool,
    ) -> LocalBoxFuture<'static, Result<()>>;
}

/// Where dead letters go (implemented by `routers::DeadLetterRouter`).
pub trait DeadLetterSink {
    /// Writes `batch` to `topic`, in the partition for `source_partition`.
    fn write(
        &self,
        topic: String,
        source_partition: i32,
        batch: Bytes,
    ) -> LocalBoxFuture<'static, Result<()>>;
}

/// The key and value of dead letters' records, by offset.
type Originals = HashMap<i64, (Option<Vec<u8>>, Option<Vec<u8>>)>;

/// One share partition and what of it is persisted.
pub struct ShareEntry {
    share: RefCell<SharePartition>,
    /// Its key in `__share_group_state` (group, topic id, partition).
    key: StateKey,
    /// The partition's leader epoch when this shard loaded it.
    leader_epoch: i32,
    /// The state epoch of the coordinator's state it was loaded from: a tool's reset moves
    /// it on, and this entry's writes are then refused (FENCED_STATE_EPOCH).
    state_epoch: i32,
    /// Changes that must be persisted (acknowledgements, releases, lock timeouts), counted,
    /// and how many of them the share coordinator has.
    version: Cell<u64>,
    persisted: Cell<u64>,
    /// One write at a time; a write carries every change made before its turn.
    write: async_lock::Mutex<()>,
    /// When a request last used it (the clock's ms): an idle one is dropped (`drop_idle`).
    last_used_ms: Cell<i64>,
}

impl ShareEntry {
    fn changed(&self) {
        self.version.set(self.version.get() + 1);
    }

    fn dirty(&self) -> bool {
        self.persisted.get() < self.version.get()
    }
}

pub struct ShareService<S: Storage> {
    partitions: Rc<PartitionService<S>>,
    stats: Rc<ShardStats>,
    clock: Clock,
    view: Rc<MetadataView>,
    shares: RefCell<HashMap<Key, Rc<ShareEntry>>>,
    /// Records released, acknowledged or timed out here: a waiting fetch may find records to
    /// take (released ones, or a window that moved on).
    released: event_listener::Event,
    /// The share coordinators (`None`: in-memory only, for tests without one).
    state: RefCell<Option<Rc<dyn StateStore>>>,
    /// Loading a share partition (reading or initializing its state) is one at a time.
    loading: async_lock::Mutex<()>,
    /// Where dead letters go (KIP-1191; `None`: nowhere, for tests without one).
    dead_letters: RefCell<Option<Rc<dyn DeadLetterSink>>>,
    /// `group.share.partition.idle.ms`.
    idle_ms: i64,
}

impl<S: Storage> ShareService<S> {
    pub fn new(
        partitions: Rc<PartitionService<S>>,
        stats: Rc<ShardStats>,
        clock: Clock,
        view: Rc<MetadataView>,
        idle_ms: i64,
    ) -> Self {
        ShareService {
            idle_ms,
            partitions,
            stats,
            clock,
            view,
            shares: RefCell::new(HashMap::new()),
            released: event_listener::Event::new(),
            state: RefCell::new(None),
            loading: async_lock::Mutex::new(()),
            dead_letters: RefCell::new(None),
        }
    }

    /// Where dead letters are written.
    pub fn set_dead_letter_router(&self, router: Rc<dyn DeadLetterSink>) {
        *self.dead_letters.borrow_mut() = Some(router);
    }

    /// Where share partitions' state is persisted.
    pub fn set_state_router(&self, router: Rc<dyn StateStore>) {
        *self.state.borrow_mut() = Some(router);
    }

    fn state_router(&self) -> Option<Rc<dyn StateStore>> {
        self.state.borrow().clone()
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
            dead_letters: value("errors.deadletterqueue.topic.name").is_some_and(|t| !t.is_empty()),
        };
        let reset = value("share.auto.offset.reset").unwrap_or_else(|| "latest".into());
        let read_committed = value("share.isolation.level").as_deref() == Some("read_committed");
        (limits, reset, read_committed)
    }

    /// The group's share partition: loaded from its persisted state, or made from
    /// `share.auto.offset.reset` (and persisted) on its first use. One loaded at another
    /// leader epoch (this shard led the partition before) is loaded again. With `revalidate`
    /// (a share session opens on it), one in memory is kept only if the coordinator's state is
    /// still at its state epoch: a tool that reset or deleted the group's offsets (with no
    /// member left) moved it on, and the new state is loaded instead.
    #[allow(clippy::too_many_arguments)]
    async fn share_partition(
        &self,
        group: &str,
        partition: &TopicPartition,
        leader_epoch: i32,
        limits: Limits,
        reset: &str,
        read_committed: bool,
        revalidate: bool,
    ) -> Result<Rc<ShareEntry>> {
        let key = (group.to_string(), partition.clone());
        let found = |shares: &HashMap<Key, Rc<ShareEntry>>| {
            shares.get(&key).filter(|entry| entry.leader_epoch == leader_epoch).cloned()
        };
        if let Some(entry) = found(&self.shares.borrow()).filter(|_| !revalidate) {
            entry.share.borrow_mut().set_limits(limits);
            return Ok(entry);
        }
        let _loading = self.loading.lock().await;
        let existing = found(&self.shares.borrow());
        if let Some(entry) = existing.clone().filter(|_| !revalidate) {
            return Ok(entry);
        }
        let image = self.view.current();
        let topic_id = image
            .topic(&partition.topic)
            .map(|topic| topic.topic_id)
            .ok_or_else(|| BrokerError::UnknownTopicOrPartition(partition.to_string()))?;
        let state_key: StateKey = (group.to_string(), topic_id, partition.partition.0);
        let router = self.state_router();
        let stored = match &router {
            Some(router) => router.read(state_key.clone(), leader_epoch).await?,
            None => None,
        };
        if let Some(entry) = existing {
            if router.is_none() || stored.as_ref().map(|s| s.state_epoch) == Some(entry.state_epoch)
            {
                entry.share.borrow_mut().set_limits(limits);
                return Ok(entry);
            }
            tracing::info!(%group, %partition, "share partition state reset by a tool: loaded again");
            self.shares.borrow_mut().remove(&key);
        }
        let (share, state_epoch) = match stored {
            Some(stored) => (SharePartition::restore(&stored.state, limits), stored.state_epoch),
            None => {
                let start = self.start_offset(partition, reset, read_committed).await?;
                let share = SharePartition::new(start, limits);
                if let Some(router) = &router {
                    let state = share.persisted();
                    router.write(state_key.clone(), leader_epoch, 0, state, true).await?;
                }
                (share, 0)
            }
        };
        tracing::debug!(%group, %partition, start = share.start_offset(), "share partition loaded");
        let entry = Rc::new(ShareEntry {
            share: RefCell::new(share),
            key: state_key,
            leader_epoch,
            state_epoch,
            version: Cell::new(0),
            persisted: Cell::new(0),
            write: async_lock::Mutex::new(()),
            last_used_ms: Cell::new(self.clock.now_ms()),
        });
        self.shares.borrow_mut().insert(key, entry.clone());
        Ok(entry)
    }

    /// Persists every change made to `entry` so far (a write in flight when this is called may
    /// not carry them: this waits for its turn, and a later turn finds them written).
    async fn persist(&self, entry: &ShareEntry) -> Result<()> {
        let wanted = entry.version.get();
        let Some(router) = self.state_router() else {
            entry.persisted.set(wanted);
            return Ok(());
        };
        let _turn = entry.write.lock().await;
        if entry.persisted.get() >= wanted {
            return Ok(());
        }
        let version = entry.version.get();
        // Dead letters first: a crash before the state write offers the records again
        // (at least once in the dead-letter topic, as Kafka's ARCHIVING state gives).
        let letters = entry.share.borrow_mut().take_dead_letters();
        if !letters.is_empty() {
            self.write_dead_letters(entry, &letters).await;
        }
        let state = entry.share.borrow().persisted();
        let written = router
            .write(entry.key.clone(), entry.leader_epoch, entry.state_epoch, state, false)
            .await;
        if let Err(BrokerError::Share(ShareError::FencedStateEpoch(why))) = &written {
            // A tool reset the state: this entry is stale; the next fetch loads the new one.
            tracing::info!(group = %entry.key.0, partition = entry.key.2, %why, "share partition state reset by a tool");
            self.forget(entry);
        }
        written?;
        entry.persisted.set(entry.persisted.get().max(version));
        Ok(())
    }

    /// Drops `entry` from memory (if it is still the one kept for its partition).
    fn forget(&self, entry: &ShareEntry) {
        let mut shares = self.shares.borrow_mut();
        let stale: Vec<Key> = shares
            .iter()
            .filter(|(_, kept)| std::ptr::eq(Rc::as_ptr(kept), entry))
            .map(|(key, _)| key.clone())
            .collect();
        for key in stale {
            shares.remove(&key);
        }
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
        revalidate: bool,
    ) -> Result<PartitionAnswer> {
        let local = self.partitions.leader_of(partition)?;
        let (limits, reset, read_committed) = self.group_settings(group);
        let leader_epoch = local.leader_epoch();
        let entry = self
            .share_partition(
                group,
                partition,
                leader_epoch,
                limits,
                &reset,
                read_committed,
                revalidate,
            )
            .await?;
        entry.last_used_ms.set(self.clock.now_ms());
        let share = &entry.share;
        let start = share.borrow().start_offset();
        share.borrow_mut().log_starts_at(local.log.log_start_offset());
        if share.borrow().start_offset() != start {
            entry.changed();
        }
        let mut answer = PartitionAnswer { lock_ms: limits.lock_ms, ..PartitionAnswer::default() };
        let mut acknowledged = false;
        if !acks.is_empty() {
            match self.acknowledge(share, member, acks) {
                Ok(()) => {
                    entry.changed();
                    acknowledged = true;
                }
                Err(error) => answer.ack_error = Some(error),
            }
        }
        // The acknowledgements' state write and the acquisition's log read run side by side:
        // the acquisition works on the state the acknowledgements left in memory (what they
        // released can be acquired again at once), and nothing is answered before the write
        // is committed (ARCHITECTURE.md, durability rules). An acquisition is never persisted,
        // so a crash before the write loses nothing that was answered.
        let persisting = async {
            if acknowledged {
                self.persist(&entry).await.err()
            } else {
                None
            }
        };
        let acquiring = async {
            match fetch {
                Some(fetch) => {
                    self.acquire(&entry, &local, partition, member, fetch, read_committed).await
                }
                None => Ok(None),
            }
        };
        let (persist_error, acquisition) = futures_util::future::join(persisting, acquiring).await;
        if acknowledged {
            answer.ack_error = persist_error;
        }
        if let Some(acquisition) = acquisition? {
            answer.batches = acquisition.batches;
            answer.acquired = acquisition.acquired;
            answer.wait_offset = acquisition.wait_offset;
        }
        Ok(answer)
    }

    /// An acquisition of up to `fetch`'s records from the log after what `entry` has
    /// acquired or handed out; None when the window is full or past the log.
    async fn acquire(
        &self,
        entry: &ShareEntry,
        local: &Partition<S>,
        partition: &TopicPartition,
        member: &str,
        fetch: FetchLimits,
        read_committed: bool,
    ) -> Result<Option<Acquisition>> {
        let share = &entry.share;
        let Some(from) = share.borrow().next_fetch_offset() else { return Ok(None) };
        let max_bytes = fetch.max_bytes.clamp(1, PARTITION_READ_BYTES_MAX);
        let read =
            match self.partitions.read(partition, Offset(from), max_bytes, read_committed).await {
                Ok(read) => read,
                // Deleted under the read: the next fetch starts past it.
                Err(BrokerError::Storage(shard::StorageError::OffsetOutOfRange { .. })) => {
                    share.borrow_mut().log_starts_at(local.log.log_start_offset());
                    return Ok(None);
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
        let wait_offset = acquired.is_empty().then(|| share.borrow().end());
        let mut counts = ShareCounts::default();
        for run in &acquired {
            let records = (run.last_offset - run.first_offset + 1) as u64;
            counts.acquired += records;
            if run.delivery_count > 1 {
                counts.redelivered += records;
            }
        }
        self.stats.share_records(counts);
        let batches: Vec<Bytes> =
            holding.into_iter().filter_map(|index| read.batches.get(index).cloned()).collect();
        crate::services::partitions::count_out(&self.stats, &partition.topic, &batches);
        Ok(Some(Acquisition { batches, acquired, wait_offset }))
    }

    /// Writes `letters` of `entry` to its group's dead-letter topic (KIP-1191), best effort:
    /// a failure is logged and counted, and the records stay archived (as Kafka).
    async fn write_dead_letters(&self, entry: &ShareEntry, letters: &[DeadLetter]) {
        let group = entry.key.0.as_str();
        let image = self.view.current();
        let overrides = image.group_configs.get(group);
        let value = |name: &str| group_config::value_of(overrides, name, &|_| None);
        let Some(topic) = value("errors.deadletterqueue.topic.name").filter(|t| !t.is_empty())
        else {
            return;
        };
        let copy = value("errors.deadletterqueue.copy.record.enable").as_deref() == Some("true");
        let Some(router) = self.dead_letters.borrow().clone() else { return };
        let partition = image
            .topic_by_id(&entry.key.1)
            .map(|t| TopicPartition::new(t.name.clone(), entry.key.2));
        let Some(partition) = partition else { return };
        let originals =
            if copy { self.originals(&partition, letters).await } else { HashMap::new() };
        let batch = dead_letter_batch(group, &partition, letters, &originals, self.clock.now_ms());
        let written = router.write(topic.clone(), partition.partition.0, batch).await;
        self.stats.share_dead_letters(letters.len() as u64, written.is_ok());
        if let Err(error) = written {
            tracing::warn!(%group, %partition, %topic, records = letters.len(), %error, "dead letters not written; the records are archived");
        }
    }

    /// The key and value of each dead letter's record, read from the log (for
    /// `errors.deadletterqueue.copy.record.enable`); a record that cannot be read is left out.
    async fn originals(&self, partition: &TopicPartition, letters: &[DeadLetter]) -> Originals {
        let mut found = HashMap::new();
        for letter in letters {
            if found.contains_key(&letter.offset) {
                continue;
            }
            let Ok(read) = self.partitions.read(partition, Offset(letter.offset), 1, false).await
            else {
                continue;
            };
            for bytes in &read.batches {
                let Ok(header) = RecordBatchHeader::parse(bytes, shard::config::BATCH_BYTES_MAX)
                else {
                    continue;
                };
                let Ok(records) = wire::compression::records_of(&header) else { continue };
                for record in records {
                    let offset = header.base_offset() + i64::from(record.offset_delta);
                    if letters.iter().any(|l| l.offset == offset) {
                        found.insert(offset, (record.key, record.value));
                    }
                }
            }
        }
        found
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
        // Accepted, rejected and released records all may open the window (or give records
        // back): fetches waiting on this shard look again.
        if counts.accepted + counts.rejected + counts.released > 0 {
            self.released.notify(usize::MAX);
        }
        Ok(())
    }

    /// Releases what `member` holds on these partitions (its share session ended).
    pub fn release_member(&self, group: &str, member: &str, partitions: &[TopicPartition]) {
        let mut counts = ShareCounts::default();
        for partition in partitions {
            let key = (group.to_string(), partition.clone());
            let Some(entry) = self.shares.borrow().get(&key).cloned() else { continue };
            let released = entry.share.borrow_mut().release_member(member);
            if released.available + released.archived > 0 {
                entry.changed();
            }
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

    /// Drops the share partitions no request used for `idle_ms`, with nothing acquired,
    /// every change written to the share coordinator, and no request or write holding them:
    /// the next fetch loads the same state from the coordinator (`share_partition`), so
    /// only memory is given back (a group's partitions once its members left or it was
    /// deleted). Kept when there is no coordinator to load them from (tests).
    fn drop_idle(&self, now_ms: i64) {
        if self.state_router().is_none() {
            return;
        }
        let mut shares = self.shares.borrow_mut();
        shares.retain(|(group, partition), entry| {
            let idle = now_ms.saturating_sub(entry.last_used_ms.get()) >= self.idle_ms
                && Rc::strong_count(entry) == 1
                && !entry.dirty()
                && entry.write.try_lock().is_some()
                && entry.share.borrow().acquired_count() == 0;
            if idle {
                tracing::debug!(%group, %partition, "share partition dropped from memory: idle");
            }
            !idle
        });
        self.stats.share_partitions_held(shares.len() as u64);
    }

    /// One timer step: expired locks, share partitions this shard no longer leads, and idle
    /// ones.
    pub fn tick_once(&self) {
        let now_ms = self.clock.now_ms();
        let mut counts = ShareCounts::default();
        let mut gone: Vec<Key> = Vec::new();
        for (key, share) in self.shares.borrow().iter() {
            if self.partitions.leader_of(&key.1).is_err() {
                gone.push(key.clone());
                continue;
            }
            let released = share.share.borrow_mut().expire_locks(now_ms);
            if released.available + released.archived > 0 {
                share.changed();
            }
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
        self.drop_idle(now_ms);
    }

    /// The timer, forever: lock timeouts, and writes of the changes no request waits for
    /// (releases by lock timeouts and ended sessions, a start moved by retention).
    pub async fn tick(self: Rc<Self>) {
        loop {
            shard::runtime::sleep(Duration::from_millis(SHARE_TICK_MS)).await;
            self.tick_once();
            let dirty: Vec<Rc<ShareEntry>> = self
                .shares
                .borrow()
                .values()
                .filter(|entry| entry.dirty() && entry.write.try_lock().is_some())
                .cloned()
                .collect();
            for entry in dirty {
                let service = self.clone();
                shard::runtime::spawn(async move {
                    if let Err(error) = service.persist(&entry).await {
                        tracing::warn!(group = %entry.key.0, partition = entry.key.2, %error, "persisting share state failed; will retry");
                    }
                })
                .detach();
            }
        }
    }
}

/// One uncompressed batch of dead letters (KIP-1191): per record, the original key and value
/// when copied (else none), stamped now, with Kafka's `__dlq.errors.*` headers (UTF-8 text).
fn dead_letter_batch(
    group: &str,
    partition: &TopicPartition,
    letters: &[DeadLetter],
    originals: &Originals,
    now_ms: i64,
) -> Bytes {
    let mut builder = wire::RecordBatchBuilder::new(now_ms);
    let topic = partition.topic.as_bytes();
    let number = partition.partition.0.to_string();
    for letter in letters {
        let (offset, count) = (letter.offset.to_string(), letter.delivery_count.to_string());
        let headers: [(&[u8], &[u8]); 6] = [
            (b"__dlq.errors.topic", topic),
            (b"__dlq.errors.partition", number.as_bytes()),
            (b"__dlq.errors.offset", offset.as_bytes()),
            (b"__dlq.errors.group", group.as_bytes()),
            (b"__dlq.errors.delivery.count", count.as_bytes()),
            (b"__dlq.errors.message", letter.reason.message().as_bytes()),
        ];
        let (key, value) = originals.get(&letter.offset).cloned().unwrap_or((None, None));
        let record =
            wire::BatchRecord { key: key.as_deref(), value: value.as_deref(), timestamp_delta: 0 };
        builder.push_with_headers(record, &headers);
    }
    Bytes::from(builder.build())
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
