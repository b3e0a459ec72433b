//! The share coordinator (KIP-932): the durable delivery state of share partitions, kept in
//! the `__share_group_state` partitions this shard leads (Kafka's ShareSnapshot records,
//! `records`), replayed when this shard becomes their leader.
//!
//! Each share partition (group, topic id, partition) has one snapshot here: its start offset
//! and the runs of its window that are acknowledged, archived or were delivered, with the
//! leader epoch of the partition leader that wrote it. Requests (from the share partition's
//! leader, over the mesh or through the inter-broker state APIs):
//! - read: the snapshot with its state epoch, or none (the leader then starts one from
//!   `share.auto.offset.reset` and initializes it); a read with a newer leader epoch records
//!   that epoch, so writes of the leader it replaced are refused from then on;
//! - initialize at state epoch E: a snapshot that starts over (a share partition's start, or
//!   a tool's reset: AlterShareGroupOffsets), refused with FENCED_STATE_EPOCH unless E is
//!   newer than the stored state's epoch (so two leaders never both start one);
//! - write: a newer snapshot, refused with FENCED_LEADER_EPOCH from an older leader epoch and
//!   with FENCED_STATE_EPOCH from an older state epoch (the leader's state was reset: it
//!   loads the new one);
//! - delete: the share partition's state goes (a tombstone).
//!
//! Durability rule: a read, initialize, write or delete is answered after its record is
//! committed to every in-sync replica of the `__share_group_state` partition (acks=all), and
//! only then applied here, so what a leader is told is what a new coordinator replays.
//! Runs on: every shard, for the `__share_group_state` partitions it leads.

pub mod records;
pub mod requests;

use crate::clock::Clock;
use crate::error::{BrokerError, GroupError, Result, ShareError};
use crate::mesh::Service;
use crate::metadata::internal::{partition_for_share_state, SHARE_STATE_TOPIC};
use crate::services::partitions::PartitionService;
use crate::services::shares::state::{Persisted, Stored};
use bytes::BytesMut;
use records::{Snapshot, StateKey};
use shard::io::Storage;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use wire::ids::TopicPartition;

/// How long a state record waits for the in-sync replicas.
const STATE_REPLICATION_TIMEOUT: Duration = Duration::from_secs(15);
/// Bytes read per step of a replay.
const REPLAY_READ_BYTES: usize = 1 << 20;

pub struct ShareStateService<S: Storage> {
    partitions: Rc<PartitionService<S>>,
    clock: Clock,
    states: RefCell<HashMap<StateKey, Snapshot>>,
    /// The `__share_group_state` partitions whose states are loaded here.
    loaded: RefCell<HashSet<TopicPartition>>,
    roles_seen: Cell<u64>,
    /// A replay takes it alone; requests share it, so a replay never interleaves with a write.
    replaying: async_lock::RwLock<()>,
    /// One read-check-append at a time per share partition (its records keep their order);
    /// those of different share partitions go on together and share the log's syncs.
    turns: RefCell<HashMap<StateKey, Arc<async_lock::Mutex<()>>>>,
}

/// A request's turn on one share partition's state (`ShareStateService::turn`).
struct Turn<'a> {
    turns: &'a RefCell<HashMap<StateKey, Arc<async_lock::Mutex<()>>>>,
    key: StateKey,
    guard: Option<async_lock::MutexGuardArc<()>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut turns = self.turns.borrow_mut();
        // Nobody holds or waits for it: forgotten, so the map holds only live turns.
        if turns.get(&self.key).is_some_and(|lock| Arc::strong_count(lock) == 1) {
            turns.remove(&self.key);
        }
    }
}

/// The partition of `__share_group_state` that holds `key`.
pub fn state_partition(key: &StateKey) -> TopicPartition {
    TopicPartition::new(SHARE_STATE_TOPIC, partition_for_share_state(&key.0, &key.1, key.2))
}

impl<S: Storage> ShareStateService<S> {
    pub fn new(partitions: Rc<PartitionService<S>>, clock: Clock) -> Self {
        ShareStateService {
            partitions,
            clock,
            states: RefCell::new(HashMap::new()),
            loaded: RefCell::new(HashSet::new()),
            roles_seen: Cell::new(0),
            replaying: async_lock::RwLock::new(()),
            turns: RefCell::new(HashMap::new()),
        }
    }

    /// Loads the states of partitions this shard now leads, drops those of partitions it no
    /// longer does.
    pub async fn follow_leadership(&self) {
        let version = self.partitions.roles_version();
        if self.roles_seen.replace(version) == version {
            return;
        }
        let _replaying = self.replaying.write().await;
        let led = self.partitions.local_of_topic(SHARE_STATE_TOPIC);
        let led_keys: HashSet<TopicPartition> = led.iter().map(|(key, _)| key.clone()).collect();
        let lost: Vec<TopicPartition> =
            self.loaded.borrow().iter().filter(|key| !led_keys.contains(*key)).cloned().collect();
        for partition in lost {
            self.states.borrow_mut().retain(|key, _| state_partition(key) != partition);
            self.loaded.borrow_mut().remove(&partition);
            tracing::info!(%partition, "no longer the share coordinator of this partition");
        }
        for (partition, owned) in led {
            if self.loaded.borrow().contains(&partition) {
                continue;
            }
            let applied = self.replay(&partition, &owned.log).await;
            self.loaded.borrow_mut().insert(partition.clone());
            tracing::info!(%partition, records = applied, "share coordinator of this partition");
        }
    }

    async fn replay(&self, partition: &TopicPartition, log: &shard::PartitionLog<S>) -> usize {
        let mut applied = 0;
        let mut offset = log.log_start_offset();
        while offset < log.log_end_offset() {
            let read = match log.read(offset, REPLAY_READ_BYTES).await {
                Ok(read) if !read.batches.is_empty() => read,
                Ok(_) => break,
                Err(error) => {
                    tracing::error!(%partition, offset, %error, "share state replay stopped: unreadable");
                    break;
                }
            };
            for batch in read.batches {
                let Ok(header) =
                    wire::RecordBatchHeader::parse(&batch, shard::config::BATCH_BYTES_MAX)
                else {
                    break;
                };
                offset = header.last_offset() + 1;
                if header.is_control() {
                    continue;
                }
                let Ok(records) = wire::compression::records_of(&header) else {
                    tracing::warn!(%partition, offset = header.base_offset(), "share state replay skipped a batch that does not decode");
                    continue;
                };
                let mut states = self.states.borrow_mut();
                for record in records {
                    let Some(key) = record.key.as_deref().and_then(records::decode_key) else {
                        continue;
                    };
                    match record.value.as_deref() {
                        None => {
                            states.remove(&key);
                        }
                        Some(value) => {
                            if let Some(snapshot) = records::decode_value(value) {
                                states.insert(key, snapshot);
                            }
                        }
                    }
                    applied += 1;
                }
            }
        }
        applied
    }

    /// Appends one record for `key` (a snapshot, or a tombstone with `None`), acks=all.
    async fn append(&self, key: &StateKey, snapshot: Option<&Snapshot>) -> Result<()> {
        let partition = state_partition(key);
        let owned = self
            .partitions
            .local(&partition)
            .filter(|_| self.loaded.borrow().contains(&partition))
            .ok_or(BrokerError::Group(GroupError::NotCoordinator))?;
        let now = self.clock.now_ms();
        let mut builder = wire::RecordBatchBuilder::new(now);
        let encoded_key = records::encode_key(key);
        let encoded_value = snapshot.map(records::encode_value);
        builder.push(wire::BatchRecord {
            key: Some(&encoded_key),
            value: encoded_value.as_deref(),
            timestamp_delta: 0,
        });
        let batch = BytesMut::from(&builder.build()[..]);
        let me = self.partitions.node();
        match owned.append_committed(&partition, me, batch, now, STATE_REPLICATION_TIMEOUT).await {
            Ok(_) => Ok(()),
            Err(BrokerError::NotLeader(_)) => Err(BrokerError::Group(GroupError::NotCoordinator)),
            Err(error) => {
                tracing::warn!(%partition, %error, "appending share state failed");
                Err(BrokerError::Group(GroupError::CoordinatorNotAvailable))
            }
        }
    }

    async fn turn(&self, key: &StateKey) -> Turn<'_> {
        let lock = self.turns.borrow_mut().entry(key.clone()).or_default().clone();
        let guard = lock.lock_arc().await;
        Turn { turns: &self.turns, key: key.clone(), guard: Some(guard) }
    }

    fn check_here(&self, key: &StateKey) -> Result<()> {
        let partition = state_partition(key);
        if !self.loaded.borrow().contains(&partition) {
            return Err(BrokerError::Group(GroupError::NotCoordinator));
        }
        Ok(())
    }

    /// The state of `key` (None: never initialized), read by a leader at `leader_epoch`, or by
    /// a tool (DescribeShareGroupOffsets) with a negative epoch.
    pub async fn read(&self, key: StateKey, leader_epoch: i32) -> Result<Option<Stored>> {
        self.follow_leadership().await;
        let _replaying = self.replaying.read().await;
        let _turn = self.turn(&key).await;
        self.check_here(&key)?;
        let Some(stored) = self.states.borrow().get(&key).cloned() else { return Ok(None) };
        let answer = Stored {
            state: stored.state.clone(),
            state_epoch: stored.state_epoch,
            leader_epoch: stored.leader_epoch,
        };
        // A negative leader epoch reads without fencing (a tool's read, not a leader's).
        if leader_epoch < 0 {
            return Ok(Some(answer));
        }
        if leader_epoch < stored.leader_epoch {
            return Err(fenced(&key, leader_epoch, stored.leader_epoch));
        }
        if leader_epoch > stored.leader_epoch {
            let newer = Snapshot { leader_epoch, ..stored.clone() };
            self.append(&key, Some(&newer)).await?;
            self.states.borrow_mut().insert(key, newer);
        }
        Ok(Some(answer))
    }

    /// A new state for `key`: one that starts over at state epoch `state_epoch`
    /// (`initialize`: a leader's first, or a tool's reset), or a newer one from its leader,
    /// whose state is at `state_epoch`.
    pub async fn write(
        &self,
        key: StateKey,
        leader_epoch: i32,
        state_epoch: i32,
        state: Persisted,
        initialize: bool,
    ) -> Result<()> {
        self.follow_leadership().await;
        let _replaying = self.replaying.read().await;
        let _turn = self.turn(&key).await;
        self.check_here(&key)?;
        let stored = self.states.borrow().get(&key).cloned();
        let now = self.clock.now_ms();
        let snapshot = match stored {
            Some(stored) if initialize && state_epoch <= stored.state_epoch => {
                return Err(state_fenced(&key, state_epoch, stored.state_epoch))
            }
            // A reset keeps the leader epoch: the leader's next read finds the new state.
            Some(stored) if initialize => Snapshot {
                snapshot_epoch: stored.snapshot_epoch + 1,
                state_epoch,
                leader_epoch: leader_epoch.max(stored.leader_epoch),
                create_timestamp: now,
                write_timestamp: now,
                state,
            },
            Some(stored) if leader_epoch < stored.leader_epoch => {
                return Err(fenced(&key, leader_epoch, stored.leader_epoch))
            }
            Some(stored) if state_epoch < stored.state_epoch => {
                return Err(state_fenced(&key, state_epoch, stored.state_epoch))
            }
            Some(stored) => Snapshot {
                snapshot_epoch: stored.snapshot_epoch + 1,
                state_epoch: stored.state_epoch,
                leader_epoch,
                create_timestamp: stored.create_timestamp,
                write_timestamp: now,
                state,
            },
            // Deleted (DeleteShareGroupOffsets) under a leader that still holds it: that
            // leader's state is stale, as after a reset.
            None if !initialize => {
                return Err(BrokerError::Share(ShareError::FencedStateEpoch(format!(
                    "the share state of {}:{} is not initialized (or was deleted)",
                    key.0, key.2
                ))))
            }
            None => Snapshot {
                snapshot_epoch: 0,
                state_epoch: state_epoch.max(0),
                leader_epoch,
                create_timestamp: now,
                write_timestamp: now,
                state,
            },
        };
        self.append(&key, Some(&snapshot)).await?;
        self.states.borrow_mut().insert(key, snapshot);
        Ok(())
    }

    /// Deletes `key`'s state (idempotent).
    pub async fn delete(&self, key: StateKey) -> Result<()> {
        self.follow_leadership().await;
        let _replaying = self.replaying.read().await;
        let _turn = self.turn(&key).await;
        self.check_here(&key)?;
        if !self.states.borrow().contains_key(&key) {
            return Ok(());
        }
        self.append(&key, None).await?;
        self.states.borrow_mut().remove(&key);
        Ok(())
    }
}

fn state_fenced(key: &StateKey, got: i32, stored: i32) -> BrokerError {
    BrokerError::Share(ShareError::FencedStateEpoch(format!(
        "share state {}:{}: state epoch {got} where the coordinator has {stored}",
        key.0, key.2
    )))
}

fn fenced(key: &StateKey, got: i32, stored: i32) -> BrokerError {
    BrokerError::FencedLeaderEpoch(format!(
        "share state {}:{}: leader epoch {got} is older than {stored}",
        key.0, key.2
    ))
}

impl<S: Storage> Service for ShareStateService<S> {
    const NAME: &'static str = "share_state";
    const IN_PROGRESS_MAX: usize = 16_384;
}
