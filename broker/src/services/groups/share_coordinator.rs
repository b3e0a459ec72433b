//! KIP-932 share groups on the coordinating shard: the service side of `share`.
//!
//! A heartbeat runs the pure step under no await, so two never interleave. Members are kept in
//! memory (see `share`); the group tick removes members whose session passed. What is written
//! to `__consumer_offsets` is the group's existence and its state index (`share_records`):
//! a heartbeat that finds subscribed partitions the index does not have writes the index with
//! them (initializes them, under `offsets_lock`, so writes land in order and a compaction sees
//! them) before it answers, and only indexed partitions are assigned (`share`), so every share
//! partition that can get state is in the index first. A group id
//! belongs to one kind of group: a share heartbeat for a classic or consumer group's id, and a
//! classic or consumer member for a share group's, is refused (GROUP_ID_NOT_FOUND).
//! Runs on: the shard that leads the group's `__consumer_offsets` partition.

use super::share::{ShareConfig, ShareGroup, ShareHeartbeat, ShareHeartbeatAnswer};
use super::share_records::{self, ShareRecord, StateIndex};
use super::GroupService;
use crate::error::{BrokerError, GroupError};
use crate::metadata::internal::partition_for_group;
use shard::io::Storage;

/// A share group as ShareGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedShareGroup {
    pub state: &'static str,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: Vec<super::share::ShareMember>,
    /// The share partitions the group may have state on (`ShareGroup::state_index`).
    pub state_index: StateIndex,
}

impl<S: Storage> GroupService<S> {
    pub(super) fn is_share_group(&self, group_id: &str) -> bool {
        self.share_groups.borrow().contains_key(group_id)
    }

    fn share_config(&self, group_id: &str) -> ShareConfig {
        let image = self.view.current();
        self.config.share.for_group(image.group_configs.get(group_id))
    }

    /// ShareGroupHeartbeat (validated by the handler): the step, then the state index with
    /// the subscribed partitions it lacks, written before the member is answered; the next
    /// heartbeat assigns them.
    pub(super) async fn share_heartbeat(
        &self,
        request: ShareHeartbeat,
    ) -> Result<ShareHeartbeatAnswer, GroupError> {
        let group_id = request.group_id.clone();
        let answer = self.share_heartbeat_step(request)?;
        self.initialize_share_partitions(&group_id).await?;
        Ok(answer)
    }

    /// Writes the group's state index with every partition of its subscribed topics, when
    /// that adds any.
    async fn initialize_share_partitions(&self, group_id: &str) -> Result<(), GroupError> {
        let grows = |service: &Self| {
            service
                .share_groups
                .borrow()
                .get(group_id)
                .and_then(ShareGroup::index_with_subscriptions)
        };
        if grows(self).is_none() {
            return Ok(());
        }
        let _guard = self.offsets_lock.lock().await;
        let Some(index) = grows(self) else { return Ok(()) };
        self.store_share_group(group_id, index).await
    }

    /// Writes `group_id`'s records with `index` as its state index, then keeps it. Called
    /// under `offsets_lock`.
    async fn store_share_group(&self, group_id: &str, index: StateIndex) -> Result<(), GroupError> {
        let epoch = self.share_groups.borrow().get(group_id).map_or(0, |group| group.epoch);
        let records = [
            share_records::encode(group_id, &ShareRecord::Metadata { epoch, metadata_hash: 0 }),
            share_records::encode(group_id, &ShareRecord::index(&index)),
        ];
        match self.append_records(group_id, &records).await {
            Ok(()) => {}
            Err(BrokerError::Group(error)) => return Err(error),
            Err(error) => {
                tracing::warn!(group = group_id, %error, "appending share group records failed");
                return Err(GroupError::CoordinatorNotAvailable);
            }
        }
        let mut groups = self.share_groups.borrow_mut();
        let group = groups.entry(group_id.to_string()).or_insert_with(|| ShareGroup::new(group_id));
        group.set_state_index(index);
        group.stored = true;
        Ok(())
    }

    /// Adds share partitions to a share group's state index (AlterShareGroupOffsets gave them
    /// state), making the group when it is none yet; a group id of another kind is
    /// GROUP_ID_NOT_FOUND.
    pub(super) async fn index_share_partitions(
        &self,
        group_id: &str,
        more: &StateIndex,
    ) -> Result<(), GroupError> {
        if self.is_other_kind(group_id) {
            return Err(GroupError::GroupIdNotFound);
        }
        // Nothing to index (every partition named is unknown): no group is made for it.
        if more.values().all(|topic| topic.partitions.is_empty()) {
            return Ok(());
        }
        let _guard = self.offsets_lock.lock().await;
        let mut index = self
            .share_groups
            .borrow()
            .get(group_id)
            .map(|group| group.state_index.clone())
            .unwrap_or_default();
        if !share_records::merge(&mut index, more) && self.is_share_group(group_id) {
            return Ok(());
        }
        self.store_share_group(group_id, index).await
    }

    /// Takes topics out of a share group's state index (DeleteShareGroupOffsets deleted their
    /// state).
    pub(super) async fn unindex_share_topics(
        &self,
        group_id: &str,
        topics: &[super::consumer::TopicId],
    ) -> Result<(), GroupError> {
        let _guard = self.offsets_lock.lock().await;
        let Some(mut index) =
            self.share_groups.borrow().get(group_id).map(|group| group.state_index.clone())
        else {
            return Ok(());
        };
        let before = index.len();
        index.retain(|topic_id, _| !topics.contains(topic_id));
        if index.len() == before {
            return Ok(());
        }
        self.store_share_group(group_id, index).await
    }

    /// A classic group with members, or a consumer group, has this id.
    fn is_other_kind(&self, group_id: &str) -> bool {
        self.consumer_cell(group_id).is_some()
            || self.cell(group_id).is_some_and(|cell| !cell.group.borrow().members.is_empty())
    }

    /// The heartbeat's pure step on the group.
    fn share_heartbeat_step(
        &self,
        request: ShareHeartbeat,
    ) -> Result<ShareHeartbeatAnswer, GroupError> {
        let group_id = request.group_id.clone();
        if !super::valid_group_id(&group_id) {
            return Err(GroupError::InvalidGroupId);
        }
        if self.is_other_kind(&group_id) {
            return Err(GroupError::GroupIdNotFound);
        }
        let config = self.share_config(&group_id);
        let image = self.view.current();
        let now_ms = self.clock.now_ms();
        let mut groups = self.share_groups.borrow_mut();
        let created = !groups.contains_key(&group_id);
        if created && request.member_epoch != 0 {
            return Err(if request.member_epoch == super::share::LEAVE_EPOCH {
                GroupError::GroupIdNotFound
            } else {
                GroupError::UnknownMemberId
            });
        }
        let group = groups.entry(group_id.clone()).or_insert_with(|| ShareGroup::new(&group_id));
        let before = group.epoch;
        let answer = group.heartbeat(&request, &*image, &config, now_ms);
        if answer.is_err() && created {
            groups.remove(&group_id);
        } else if group.epoch != before {
            self.stats.share_group_rebalance();
        }
        answer
    }

    /// Removes members whose session passed.
    pub(super) fn expire_share_members(&self) {
        let now_ms = self.clock.now_ms();
        let image = self.view.current();
        let mut groups = self.share_groups.borrow_mut();
        for (group_id, group) in groups.iter_mut() {
            for member_id in group.expired(now_ms) {
                group.remove(&member_id, &*image);
                tracing::info!(group = %group_id, member = %member_id, "share group member removed: its session timed out");
            }
        }
    }

    pub(super) fn describe_share(&self, group_id: &str) -> Option<DescribedShareGroup> {
        let groups = self.share_groups.borrow();
        let group = groups.get(group_id)?;
        Some(DescribedShareGroup {
            state: group.state(),
            epoch: group.epoch,
            assignment_epoch: group.assignment_epoch,
            members: group.members.values().cloned().collect(),
            state_index: group.state_index.clone(),
        })
    }

    /// DeleteGroups of a share group: only without members; its records get tombstones (the
    /// handler deleted the state of its index first).
    pub(super) async fn delete_share_group(
        &self,
        group_id: &str,
    ) -> Option<Result<(), BrokerError>> {
        let check = |service: &Self| {
            let groups = service.share_groups.borrow();
            let group = groups.get(group_id)?;
            if !group.members.is_empty() {
                return Some(Err(GroupError::NonEmptyGroup));
            }
            Some(Ok(group.stored))
        };
        let stored = match check(self)? {
            Ok(stored) => stored,
            Err(error) => return Some(Err(BrokerError::Group(error))),
        };
        let _guard = self.offsets_lock.lock().await;
        if stored {
            let records = [
                share_records::encode(group_id, &ShareRecord::MetadataTombstone),
                share_records::encode(group_id, &ShareRecord::StatePartitionsTombstone),
            ];
            if let Err(error) = self.append_records(group_id, &records).await {
                return Some(Err(error));
            }
        }
        // A member may have joined while the tombstones were written: the group stays, with
        // its index, which is written again at the next assignment.
        match check(self)? {
            Ok(_) => {
                self.share_groups.borrow_mut().remove(group_id);
                Some(Ok(()))
            }
            Err(error) => {
                if let Some(group) = self.share_groups.borrow_mut().get_mut(group_id) {
                    group.stored = false;
                    group.set_state_index(StateIndex::new());
                }
                Some(Err(BrokerError::Group(error)))
            }
        }
    }

    /// Applies a share-group record met in replay (a record of a group of another kind here is
    /// logged and counted).
    pub(super) fn replay_share_record(&self, key: &[u8], value: Option<&[u8]>) -> bool {
        let Some((group_id, record)) = share_records::decode(key, value) else {
            tracing::warn!("offsets replay skipped an unreadable share group record");
            self.stats.offsets_replay_skipped(1);
            return false;
        };
        let mut groups = self.share_groups.borrow_mut();
        match record {
            ShareRecord::MetadataTombstone | ShareRecord::StatePartitionsTombstone => {
                groups.remove(&group_id);
            }

            ShareRecord::Metadata { epoch, .. } => {
                let group =
                    groups.entry(group_id.clone()).or_insert_with(|| ShareGroup::new(&group_id));
                group.epoch = group.epoch.max(epoch);
                group.assignment_epoch = group.assignment_epoch.max(epoch);
                group.stored = true;
            }
            ShareRecord::StatePartitions { initializing, initialized, deleting } => {
                let group =
                    groups.entry(group_id.clone()).or_insert_with(|| ShareGroup::new(&group_id));
                let mut index = initialized;
                share_records::merge(&mut index, &initializing);
                // Kafka's deleting topics name no partitions: all the topic has now.
                let image = self.view.current();
                for (topic_id, name) in deleting {
                    let count = image.topic_by_id(&topic_id).map_or(0, |t| t.partition_count());
                    let topic = index.entry(topic_id).or_default();
                    topic.name = name;
                    topic.partitions.extend(0..count);
                }
                group.set_state_index(index);
                group.stored = true;
            }
        }
        true
    }

    /// The records of the share groups on `__consumer_offsets` partition `index`, as a
    /// compaction rewrites them.
    pub(super) fn share_records_of(&self, index: i32) -> Vec<(Vec<u8>, Vec<u8>)> {
        let groups = self.share_groups.borrow();
        let mut live = Vec::new();
        for (group_id, group) in groups.iter() {
            if !group.stored || partition_for_group(group_id) != index {
                continue;
            }
            let metadata = ShareRecord::Metadata { epoch: group.epoch, metadata_hash: 0 };
            for record in [metadata, ShareRecord::index(&group.state_index)] {
                if let (key, Some(value)) = share_records::encode(group_id, &record) {
                    live.push((key, value));
                }
            }
        }
        live
    }
}
