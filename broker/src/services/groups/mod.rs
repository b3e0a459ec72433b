//! The group coordinator service: consumer groups and their committed offsets.
//!
//! Owns, on the shard that owns a group's partition of `__consumer_offsets` (partition =
//! Java `String.hashCode(group)` mod 50, as Kafka places groups; see
//! `metadata::internal::partition_for_group`): the group's membership (`state_machine`, driven
//! by `coordinator`), its committed offsets, and their durable records in that partition
//! (`offsets`, `stored`), replayed at startup. A timer (`tick`) expires sessions and unused
//! pending member ids, completes joins whose deadline passed, expires old offsets, stores
//! changed groups and compacts the offsets partitions.
//! Invariants: a group lives on exactly one shard; every commit and group record is synced to
//! `__consumer_offsets` before it is acknowledged; errors are typed (`GroupError`), and only
//! `error.rs` turns them into Kafka codes.
//! Runs on: every shard, for the groups it coordinates.

pub mod assignors;
pub mod consumer;
mod consumer_coordinator;
mod coordinator;
mod migration;
pub mod offsets;
pub mod requests;
pub mod share;
mod share_coordinator;
pub mod share_records;
pub mod state_machine;
pub mod stored;
pub mod txn_offsets;

pub use consumer_coordinator::{DescribedConsumerGroup, DescribedConsumerMember};
pub use coordinator::{Described, DescribedMember};
pub use offsets::{Committed, OFFSET_METADATA_BYTES_MAX};
pub use share_coordinator::DescribedShareGroup;
pub use state_machine::{Assignment, JoinOutcome, JoinRequest};
pub use txn_offsets::TxnCommit;

use crate::clock::Clock;
use crate::error::{BrokerError, GroupError, Result};
use crate::mesh::Service;
use crate::metadata::internal::OFFSETS_TOPIC;
use crate::services::metadata::MetadataView;
use crate::services::partitions::PartitionService;
use crate::stats::ShardStats;
use offsets::OffsetTable;
use shard::io::Storage;
use state_machine::Group;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;
use wire::ids::TopicPartition;

/// ListGroups' type of a group of the classic protocol.
pub const CLASSIC_GROUP_TYPE: &str = "classic";
/// ListGroups' type of a KIP-848 consumer group.
pub const CONSUMER_GROUP_TYPE: &str = "consumer";

/// How often the coordinator checks sessions and rebalance deadlines.
pub const GROUP_TICK_MS: u64 = 100;
/// Ticks between offset-expiry and compaction checks (once a second).
const OFFSET_EXPIRY_TICKS: u64 = 1000 / GROUP_TICK_MS;

/// Whether `group` can be coordinated: not empty, and without NUL (the separator of its
/// `__consumer_offsets` record keys, so such an id could not be replayed).
pub fn valid_group_id(group: &str) -> bool {
    !group.is_empty() && !group.contains('\0')
}

/// Runs a group's timers up to `now`, waking its waiters if its members or generation changed.
fn settle(cell: &GroupCell, now: std::time::Instant) {
    let changed = cell.group.borrow_mut().tick(now);
    if changed {
        cell.notify();
    }
}

/// A group and the event its waiters (JoinGroup, SyncGroup) listen on.
pub struct GroupCell {
    group: RefCell<Group>,
    changed: event_listener::Event,
}

impl GroupCell {
    fn with(group: Group) -> Self {
        GroupCell { group: RefCell::new(group), changed: event_listener::Event::new() }
    }

    fn notify(&self) {
        self.changed.notify(usize::MAX);
    }
}

/// The coordinator's settings (from the broker configuration).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// Kafka's `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: u64,
    /// Kafka's `offsets.retention.minutes`, in milliseconds.
    pub offsets_retention_ms: u64,
    /// An `__consumer_offsets` partition larger than this is compacted (strata).
    pub offsets_compact_bytes: u64,
    /// KIP-848 consumer groups (`group.consumer.*`).
    pub consumer: consumer::ConsumerConfig,
    /// KIP-932 share groups (`group.share.*`).
    pub share: share::ShareConfig,
    /// The broker's authorizer (a regex subscription resolves to the topics its member may
    /// describe).
    pub authorizer: crate::authorization::Authorizer,
}

/// What DeleteOffsets did: the partitions whose offsets it deleted (those that had one), and
/// those it kept because a member of the group is subscribed to their topic (KIP-496).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetsDeleted {
    pub deleted: Vec<TopicPartition>,
    pub subscribed: Vec<TopicPartition>,
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group: String,
    pub state: &'static str,
    pub protocol_type: String,
    /// "classic", "consumer" (KIP-848) or "share" (KIP-932); ListGroups v5.
    pub group_type: &'static str,
}

pub struct GroupService<S: Storage> {
    partitions: Rc<PartitionService<S>>,
    stats: Rc<ShardStats>,
    config: GroupConfig,
    clock: Clock,
    /// Committed offsets of the groups this shard coordinates.
    offsets: RefCell<OffsetTable>,
    /// Serializes commits, deletions and compactions of the offsets table.
    offsets_lock: async_lock::Mutex<()>,
    groups: RefCell<HashMap<String, Rc<GroupCell>>>,
    /// KIP-848 consumer groups (a group id is in this map or in `groups`, never both).
    consumer_groups: RefCell<HashMap<String, Rc<consumer_coordinator::ConsumerCell>>>,
    /// KIP-932 share groups (an id is in one of the three maps at most).
    share_groups: RefCell<HashMap<String, share::ShareGroup>>,
    /// The metadata image (topic ids and partition counts for assignments).
    view: Rc<MetadataView>,
    /// Offsets committed in transactions still open (`txn_offsets`).
    pending_txn: RefCell<txn_offsets::PendingTxnOffsets>,
    /// The `__consumer_offsets` partitions whose groups are loaded here (this shard leads
    /// them; `follow_leadership`).
    loaded: RefCell<std::collections::HashSet<TopicPartition>>,
    /// The partition service's roles version `follow_leadership` last saw.
    roles_seen: std::cell::Cell<u64>,
}

impl<S: Storage> GroupService<S> {
    pub fn new(
        partitions: Rc<PartitionService<S>>,
        stats: Rc<ShardStats>,
        config: GroupConfig,
        clock: Clock,
        view: Rc<MetadataView>,
    ) -> Self {
        GroupService {
            partitions,
            stats,
            config,
            clock,
            consumer_groups: RefCell::new(HashMap::new()),
            share_groups: RefCell::new(HashMap::new()),
            view,
            offsets: RefCell::new(HashMap::new()),
            offsets_lock: async_lock::Mutex::new(()),
            groups: RefCell::new(HashMap::new()),
            pending_txn: RefCell::default(),
            loaded: RefCell::default(),
            roles_seen: std::cell::Cell::new(0),
        }
    }

    /// The group, as of now: its timers (sessions, pending ids, join deadline) are brought up
    /// to date first. The timer task runs every `GROUP_TICK_MS`, but Kafka expires a session on
    /// a precise timer, and clients count on it: a request that arrives once a session ended
    /// (a DeleteGroups right after a static member's session timeout) sees the member gone.
    fn cell(&self, group: &str) -> Option<Rc<GroupCell>> {
        let cell = self.groups.borrow().get(group).cloned()?;
        settle(&cell, self.clock.now());
        Some(cell)
    }

    fn cell_or_new(&self, group: &str) -> Rc<GroupCell> {
        self.groups
            .borrow_mut()
            .entry(group.to_string())
            .or_insert_with(|| Rc::new(GroupCell::with(Group::empty())))
            .clone()
    }

    fn member_count(&self, group: &str) -> usize {
        self.cell(group).map(|cell| cell.group.borrow().members.len()).unwrap_or(0)
    }

    fn fetch_offsets(
        &self,
        group: &str,
        wanted: Option<Vec<TopicPartition>>,
    ) -> Vec<(TopicPartition, Committed)> {
        let table = self.offsets.borrow();
        let Some(committed) = table.get(group) else { return Vec::new() };
        match wanted {
            Some(wanted) => wanted
                .into_iter()
                .filter_map(|key| committed.get(&key).map(|entry| (key, entry.clone())))
                .collect(),
            None => committed.iter().map(|(key, entry)| (key.clone(), entry.clone())).collect(),
        }
    }

    /// DeleteGroups (`partitions` None: only for groups without members) and OffsetDelete.
    async fn delete_group_offsets(
        &self,
        group: &str,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<OffsetsDeleted> {
        if let Some(cell) = self.consumer_cell(group) {
            return self.delete_consumer_offsets(group, cell, partitions).await;
        }
        if partitions.is_none() {
            if let Some(deleted) = self.delete_share_group(group).await {
                deleted?;
                return Ok(OffsetsDeleted::default());
            }
        }
        let members = self.member_count(group);
        let known = self.offsets.borrow().contains_key(group) || self.cell(group).is_some();
        if !known {
            return Err(BrokerError::Group(GroupError::GroupIdNotFound));
        }
        let whole_group = partitions.is_none();
        let (partitions, subscribed) = match partitions {
            _ if members == 0 => (partitions, Vec::new()),
            None => return Err(BrokerError::Group(GroupError::NonEmptyGroup)),
            Some(partitions) => {
                let Some(cell) = self.cell(group) else {
                    return Err(BrokerError::Group(GroupError::NonEmptyGroup));
                };
                let live = cell.group.borrow();
                if live.protocol_type != state_machine::CONSUMER_PROTOCOL_TYPE {
                    return Err(BrokerError::Group(GroupError::NonEmptyGroup));
                }
                // Unreadable subscriptions: every topic counts as subscribed (as in Kafka).
                let topics = live.subscribed_topics();
                let is_subscribed = |partition: &TopicPartition| {
                    topics.as_ref().is_none_or(|topics| topics.contains(&partition.topic))
                };
                let (subscribed, free): (Vec<_>, Vec<_>) =
                    partitions.into_iter().partition(|partition| is_subscribed(partition));
                (Some(free), subscribed)
            }
        };
        let deleted = self.delete_offsets(group, partitions).await?;
        if members == 0 && (whole_group || !self.offsets.borrow().contains_key(group)) {
            self.groups.borrow_mut().remove(group);
        }
        Ok(OffsetsDeleted { deleted, subscribed })
    }

    fn list(&self) -> Vec<ListedGroup> {
        let mut listed: std::collections::BTreeMap<String, ListedGroup> = self
            .offsets
            .borrow()
            .keys()
            .map(|group| {
                let empty = ListedGroup {
                    group: group.clone(),
                    state: state_machine::State::Empty.name(),
                    protocol_type: String::new(),
                    group_type: CLASSIC_GROUP_TYPE,
                };
                (group.clone(), empty)
            })
            .collect();
        let now = self.clock.now();
        for (name, cell) in self.groups.borrow().iter() {
            settle(cell, now);
            let group = cell.group.borrow();
            let entry = ListedGroup {
                group: name.clone(),
                state: group.state.name(),
                protocol_type: group.protocol_type.clone(),
                group_type: CLASSIC_GROUP_TYPE,
            };
            listed.insert(name.clone(), entry);
        }
        for (name, cell) in self.consumer_groups.borrow().iter() {
            let entry = ListedGroup {
                group: name.clone(),
                state: cell.group.borrow().state().name(),
                protocol_type: state_machine::CONSUMER_PROTOCOL_TYPE.to_string(),
                group_type: CONSUMER_GROUP_TYPE,
            };
            listed.insert(name.clone(), entry);
        }
        for (name, group) in self.share_groups.borrow().iter() {
            let entry = ListedGroup {
                group: name.clone(),
                state: group.state(),
                protocol_type: share::SHARE_GROUP_TYPE.to_string(),
                group_type: share::SHARE_GROUP_TYPE,
            };
            listed.insert(name.clone(), entry);
        }
        listed.into_values().collect()
    }

    fn committed(&self) -> Vec<(String, TopicPartition, i64)> {
        self.offsets
            .borrow()
            .iter()
            .flat_map(|(group, map)| {
                map.iter().map(move |(key, entry)| (group.clone(), key.clone(), entry.offset))
            })
            .collect()
    }

    /// Writes the metadata record of groups that changed since their last one and are now
    /// Stable or Empty (a static member's new id, the last member gone); a generation still
    /// forming is written when its SyncGroup completes.
    async fn store_dirty_groups(&self) {
        let dirty: Vec<String> = self
            .groups
            .borrow()
            .iter()
            .filter(|(_, cell)| {
                let group = cell.group.borrow();
                group.dirty
                    && matches!(
                        group.state,
                        state_machine::State::Stable | state_machine::State::Empty
                    )
            })
            .map(|(name, _)| name.clone())
            .collect();
        for group in dirty {
            if let Err(error) = self.store_group(&group).await {
                tracing::warn!(%group, %error, "storing group metadata failed; will retry");
            }
        }
    }

    /// One timer step: sessions and join deadlines of every group, and once a second offset
    /// expiry and compaction.
    pub async fn tick_once(&self, ticks: u64) {
        self.follow_leadership().await;
        if ticks.is_multiple_of(OFFSET_EXPIRY_TICKS) {
            self.expire_offsets().await;
            for (partition, _) in self.partitions.local_of_topic(OFFSETS_TOPIC) {
                if let Err(error) = self.compact(&partition).await {
                    tracing::warn!(%partition, %error, "compacting committed offsets failed");
                }
            }
        }
        self.store_dirty_groups().await;
        self.expire_consumer_members().await;
        self.expire_share_members();
        let now = self.clock.now();
        let cells: Vec<Rc<GroupCell>> = self.groups.borrow().values().cloned().collect();
        for cell in cells {
            settle(&cell, now);
        }
    }

    /// The timer, forever.
    pub async fn tick(self: Rc<Self>) {
        let mut ticks: u64 = 0;
        loop {
            shard::runtime::sleep(Duration::from_millis(GROUP_TICK_MS)).await;
            ticks += 1;
            self.tick_once(ticks).await;
        }
    }
}

impl<S: Storage> Service for GroupService<S> {
    const NAME: &'static str = "groups";
    /// Joins and syncs wait for their generation (up to the rebalance timeout), so this bound
    /// is larger than a group's member limit.
    const IN_PROGRESS_MAX: usize = 16_384;
}
