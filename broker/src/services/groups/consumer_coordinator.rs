//! KIP-848 consumer groups on the coordinating shard: the async side of `consumer`.
//!
//! Each group has a turn (an async mutex) held from computing a step to applying it, so two
//! heartbeats never compute from the same state. A step's records are appended to the group's
//! `__consumer_offsets` partition (acks=all, under the offsets lock as commits are, so a
//! compaction never runs between an append and its apply) and applied only once durable: what
//! a member is told is always what a restarted or new coordinator replays. Timers (sessions,
//! rebalance deadlines for revocations) are checked by the group tick; a member whose timer
//! passed is fenced with durable records like a leave.
//! Durability rule: a heartbeat's answer is sent after its records are committed to every
//! in-sync replica of the group's `__consumer_offsets` partition.
//! Runs on: the shard that leads the group's `__consumer_offsets` partition.

use super::consumer::{self, records, ConsumerGroup, HeartbeatAnswer, HeartbeatRequest, Record};
use super::GroupService;
use crate::authorization::{AclOperation, Resource};
use crate::error::{BrokerError, GroupError};
use shard::io::Storage;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use wire::ids::TopicPartition;

/// A heartbeat step with an assignment longer than this is logged (the assignment time strata aims under).
const ASSIGNMENT_SLOW_US: u64 = 50_000;

/// A consumer group and its turn.
pub struct ConsumerCell {
    pub(super) group: RefCell<ConsumerGroup>,
    pub(super) turn: async_lock::Mutex<()>,
    /// When the rebalance in progress began (the first epoch bump since the group was
    /// last Stable), for `strata_consumer_group_rebalance_microseconds_total`.
    rebalancing_since: std::cell::Cell<Option<Instant>>,
}

impl ConsumerCell {
    pub(super) fn with(group: ConsumerGroup) -> Self {
        ConsumerCell {
            group: RefCell::new(group),
            turn: async_lock::Mutex::new(()),
            rebalancing_since: std::cell::Cell::new(None),
        }
    }
}

/// A member as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConsumerMember {
    pub member: consumer::Member,
    pub target: consumer::Partitions,
}

/// A consumer group as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConsumerGroup {
    pub state: &'static str,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<DescribedConsumerMember>,
}

impl<S: Storage> GroupService<S> {
    pub(super) fn consumer_cell(&self, group: &str) -> Option<Rc<ConsumerCell>> {
        self.consumer_groups.borrow().get(group).cloned()
    }

    /// ConsumerGroupHeartbeat (the request was validated by the handler).
    pub(super) async fn consumer_heartbeat(
        &self,
        request: HeartbeatRequest,
    ) -> Result<HeartbeatAnswer, GroupError> {
        let group_id = request.group_id.clone();
        if !super::valid_group_id(&group_id) {
            return Err(GroupError::InvalidGroupId);
        }
        self.take_over_classic(&group_id, request.member_epoch).await?;
        let cell = match self.consumer_cell(&group_id) {
            Some(cell) => cell,
            None if request.member_epoch == 0 => {
                let cell = Rc::new(ConsumerCell::with(ConsumerGroup::new(&group_id)));
                self.consumer_groups.borrow_mut().insert(group_id.clone(), cell.clone());
                cell
            }
            None => return Err(GroupError::GroupIdNotFound),
        };
        let _turn = cell.turn.lock().await;
        let image = self.view.current();
        let started = Instant::now();
        let step = {
            let group = cell.group.borrow();
            let existing = group.is_live().then_some(&*group);
            let now_ms = self.clock.now_ms();
            let (authorizer, acls) = (&self.config.authorizer, &image.acls);
            let describable = |topic: &str| {
                let (operation, resource) = (AclOperation::Describe, Resource::Topic(topic));
                authorizer.authorize(acls, &request.principal, &request.host, operation, resource)
            };
            let config = self.config.consumer.for_group(image.group_configs.get(&group_id));
            consumer::heartbeat(existing, &request, &*image, &config, now_ms, &describable)
        };
        let assigned = step.as_ref().is_ok_and(|step| {
            step.records.iter().any(|record| matches!(record, Record::TargetMetadata { .. }))
        });
        if assigned {
            let micros = started.elapsed().as_micros() as u64;
            self.stats.consumer_assignment(micros);
            if micros > ASSIGNMENT_SLOW_US {
                tracing::warn!(group = %group_id, micros, "a consumer group's assignment took long");
            }
        }
        let step = match step {
            Ok(step) => step,
            Err(error) => {
                self.forget_if_unborn(&group_id, &cell);
                return Err(error);
            }
        };
        if let Err(error) = self.append_consumer(&group_id, &cell, &step.records).await {
            self.forget_if_unborn(&group_id, &cell);
            return Err(error);
        }
        {
            let mut group = cell.group.borrow_mut();
            group.checked_version = image.version;
            if request.member_epoch >= 0 {
                self.arm_timers(&mut group, &step.answer.member_id);
            }
        }
        drop(_turn);
        if request.member_epoch < 0 {
            self.maybe_downgrade(&group_id, &cell).await;
        }
        Ok(step.answer)
    }

    /// A group created by a heartbeat that failed before its first record is forgotten.
    fn forget_if_unborn(&self, group_id: &str, cell: &Rc<ConsumerCell>) {
        let unborn = {
            let group = cell.group.borrow();
            !group.is_live()
        };
        if unborn {
            self.consumer_groups.borrow_mut().remove(group_id);
        }
    }

    /// Appends a step's records durably, then applies them.
    pub(super) async fn append_consumer(
        &self,
        group_id: &str,
        cell: &ConsumerCell,
        step: &[Record],
    ) -> Result<(), GroupError> {
        if step.is_empty() {
            return Ok(());
        }
        let encoded: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            step.iter().map(|record| records::encode(group_id, record)).collect();
        let _guard = self.offsets_lock.lock().await;
        match self.append_records(group_id, &encoded).await {
            Ok(()) => {}
            Err(BrokerError::Group(error)) => return Err(error),
            Err(error) => {
                tracing::warn!(group = group_id, %error, "appending consumer group records failed");
                return Err(GroupError::CoordinatorNotAvailable);
            }
        }
        let mut group = cell.group.borrow_mut();
        let mut bumps = 0;
        for record in step {
            // The records were computed from this very state under the group's turn.
            let applied = group.apply(record);
            assert!(applied.is_ok(), "group {group_id}: {applied:?}");
            bumps += u64::from(matches!(record, Record::GroupMetadata { .. }));
        }
        let now = self.clock.now();
        if bumps > 0 && cell.rebalancing_since.get().is_none() {
            cell.rebalancing_since.set(Some(now));
        }
        let completed = match cell.rebalancing_since.get() {
            Some(since) if group.state() == consumer::GroupState::Stable => {
                cell.rebalancing_since.set(None);
                Some(now.saturating_duration_since(since).as_micros() as u64)
            }
            _ => None,
        };
        self.stats.consumer_rebalance(bumps, completed);
        Ok(())
    }

    /// After a member's heartbeat: its session restarts, and a member asked to revoke gets
    /// its rebalance timeout (once per member epoch).
    pub(super) fn arm_timers(&self, group: &mut ConsumerGroup, member_id: &str) {
        let now = self.clock.now();
        let Some(member) = group.members.get(member_id) else { return };
        // A classic member keeps the session timeout of its JoinGroup.
        let session_ms = match &member.meta.classic {
            Some(classic) => classic.session_timeout_ms,
            None => {
                let image = self.view.current();
                let config =
                    self.config.consumer.for_group(image.group_configs.get(&group.group_id));
                config.session_timeout_ms
            }
        };
        let session = Duration::from_millis(session_ms.max(0) as u64);
        let revoking = member.state == consumer::MemberState::UnrevokedPartitions;
        let (epoch, rebalance_ms) = (member.epoch, member.meta.rebalance_timeout_ms.max(0) as u64);
        let previous = group.deadlines.get(member_id).and_then(|d| d.revocation);
        let revocation = match previous {
            _ if !revoking => None,
            Some((at_epoch, deadline)) if at_epoch == epoch => Some((epoch, deadline)),
            _ => Some((epoch, now + Duration::from_millis(rebalance_ms))),
        };
        let deadlines = consumer::group::Deadlines { session: now + session, revocation };
        group.deadlines.insert(member_id.to_string(), deadlines);
    }

    /// Sessions for every member of groups just loaded (they start again now), and the
    /// rebalance timeout of members that were revoking.
    pub(super) fn arm_loaded_consumer_groups(&self) {
        let cells: Vec<Rc<ConsumerCell>> =
            self.consumer_groups.borrow().values().cloned().collect();
        for cell in cells {
            let mut group = cell.group.borrow_mut();
            let ids: Vec<String> = group
                .members
                .keys()
                .filter(|id| !group.deadlines.contains_key(*id))
                .cloned()
                .collect();
            for id in ids {
                self.arm_timers(&mut group, &id);
            }
        }
        self.consumer_groups.borrow_mut().retain(|_, cell| {
            let group = cell.group.borrow();
            group.is_live()
        });
    }

    /// Fences members whose session or rebalance timeout passed.
    pub(super) async fn expire_consumer_members(&self) {
        let now = self.clock.now();
        let cells: Vec<(String, Rc<ConsumerCell>)> = self
            .consumer_groups
            .borrow()
            .iter()
            .map(|(name, cell)| (name.clone(), cell.clone()))
            .collect();
        for (group_id, cell) in cells {
            let expired = expired_members(&cell.group.borrow(), now);
            let any = !expired.is_empty();
            for member_id in expired {
                let _turn = cell.turn.lock().await;
                // Still expired under the turn (a heartbeat may have come meanwhile).
                if !expired_members(&cell.group.borrow(), self.clock.now()).contains(&member_id) {
                    continue;
                }
                let image = self.view.current();
                let fenced = consumer::fence(&cell.group.borrow(), &member_id, &*image);
                match self.append_consumer(&group_id, &cell, &fenced).await {
                    Ok(()) => {
                        tracing::info!(group = %group_id, member = %member_id, "member fenced: its session or rebalance timeout passed")
                    }
                    Err(error) => {
                        tracing::warn!(group = %group_id, member = %member_id, %error, "fencing a member failed; will retry")
                    }
                }
            }
            if any {
                self.maybe_downgrade(&group_id, &cell).await;
            }
        }
    }

    /// DeleteGroups (`partitions` None: the group, only when it has no members) and
    /// OffsetDelete (while it has members, only of topics no member subscribes to).
    pub(super) async fn delete_consumer_offsets(
        &self,
        group_id: &str,
        cell: Rc<ConsumerCell>,
        partitions: Option<Vec<TopicPartition>>,
    ) -> crate::error::Result<super::OffsetsDeleted> {
        let _turn = cell.turn.lock().await;
        let (members, subscribed_topics) = {
            let group = cell.group.borrow();
            let mut topics: std::collections::BTreeSet<String> =
                group.subscribed_names.keys().cloned().collect();
            for resolved in group.regexes.values() {
                topics.extend(resolved.topics.iter().cloned());
            }
            (group.members.len(), topics)
        };
        let Some(partitions) = partitions else {
            if members > 0 {
                return Err(BrokerError::Group(GroupError::NonEmptyGroup));
            }
            let deleted = self.delete_offsets(group_id, None).await?;
            let tombstones = cell.group.borrow().tombstones();
            self.append_consumer(group_id, &cell, &tombstones).await?;
            self.consumer_groups.borrow_mut().remove(group_id);
            return Ok(super::OffsetsDeleted { deleted, subscribed: Vec::new() });
        };
        let (subscribed, free): (Vec<_>, Vec<_>) = partitions
            .into_iter()
            .partition(|p| members > 0 && subscribed_topics.contains(&p.topic));
        let deleted = self.delete_offsets(group_id, Some(free)).await?;
        Ok(super::OffsetsDeleted { deleted, subscribed })
    }

    /// A commit's member and epoch against a consumer group (KIP-848): a commit without a
    /// member (negative epoch) is taken while the group has none; a member must exist, commit
    /// with its current epoch (STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for a classic member)
    /// and, for a consumer-protocol member, through OffsetCommit v9 or later.
    pub(super) fn check_consumer_commit(
        &self,
        cell: &ConsumerCell,
        member_id: &str,
        epoch: i32,
        api_version: Option<i16>,
    ) -> Result<(), GroupError> {
        let group = cell.group.borrow();
        if epoch < 0 && group.members.is_empty() {
            return Ok(());
        }
        let member = group.members.get(member_id).ok_or(GroupError::UnknownMemberId)?;
        if !member.is_classic() && api_version.is_some_and(|v| v < 9) {
            return Err(GroupError::UnsupportedVersion(
                "OffsetCommit below v9 from a consumer group member".to_string(),
            ));
        }
        if epoch != member.epoch {
            return Err(if member.is_classic() {
                GroupError::IllegalGeneration
            } else {
                GroupError::StaleMemberEpoch
            });
        }
        Ok(())
    }

    /// OffsetFetch v9's member check: none when no member is named; else the member must
    /// exist and fetch with its current epoch.
    pub(super) fn check_consumer_fetch(
        &self,
        group_id: &str,
        member: Option<(&str, i32)>,
    ) -> Result<(), GroupError> {
        let Some((member_id, epoch)) = member else { return Ok(()) };
        let Some(cell) = self.consumer_cell(group_id) else { return Ok(()) };
        let group = cell.group.borrow();
        let member = group.members.get(member_id).ok_or(GroupError::UnknownMemberId)?;
        if member.epoch != epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    pub(super) fn describe_consumer(&self, group_id: &str) -> Option<DescribedConsumerGroup> {
        let cell = self.consumer_cell(group_id)?;
        let group = cell.group.borrow();
        let assignor = consumer::heartbeat::preferred_assignor_of(&group, &self.config.consumer);
        Some(DescribedConsumerGroup {
            state: group.state().name(),
            epoch: group.epoch,
            assignment_epoch: group.assignment_epoch,
            assignor: assignor.name().to_string(),
            members: group
                .members
                .values()
                .map(|member| DescribedConsumerMember {
                    member: member.clone(),
                    target: group.target_of(member.id()),
                })
                .collect(),
        })
    }
}

/// Members whose session passed, or who did not revoke within their rebalance timeout.
fn expired_members(group: &ConsumerGroup, now: Instant) -> Vec<String> {
    group
        .deadlines
        .iter()
        .filter(|(member_id, deadlines)| {
            let revoking = group.members.get(*member_id).is_some_and(|member| {
                member.state == consumer::MemberState::UnrevokedPartitions
                    && deadlines
                        .revocation
                        .is_some_and(|(epoch, at)| epoch == member.epoch && at <= now)
            });
            deadlines.session <= now || revoking
        })
        .map(|(member_id, _)| member_id.clone())
        .collect()
}
