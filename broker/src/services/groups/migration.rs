//! Classic and consumer groups on the coordinating shard (the async side of
//! `consumer::classic`): a classic group with members becomes a consumer group when a
//! consumer-protocol member joins it (if `group.consumer.migration.policy` allows upgrades),
//! the classic requests of its remaining classic members are answered from the consumer group,
//! and the consumer group becomes classic again when its last consumer-protocol member is gone
//! (if the policy allows downgrades). Committed offsets are separate records and untouched.
//! Durability rule: each conversion is appended (acks=all) before it is applied; an upgrade is
//! one batch (the classic group's tombstone and the consumer group's records), a downgrade
//! the consumer group's tombstones and then the classic group's record.
//! Runs on: the shard that leads the group's `__consumer_offsets` partition.

use super::consumer::classic::{self, ClassicJoined};
use super::consumer::{self, records, ConsumerGroup};
use super::consumer_coordinator::ConsumerCell;
use super::state_machine::{Assignment, JoinOutcome, JoinRequest, Joined, CONSUMER_PROTOCOL_TYPE};
use super::{stored, GroupCell, GroupService};
use crate::error::{BrokerError, GroupError};
use shard::io::Storage;
use std::rc::Rc;

impl<S: Storage> GroupService<S> {
    /// A consumer-protocol member joins a classic group: an empty one gives way; one with
    /// members is converted when the policy allows, else GROUP_ID_NOT_FOUND (as Kafka).
    pub(super) async fn take_over_classic(
        &self,
        group_id: &str,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let Some(cell) = self.groups.borrow().get(group_id).cloned() else { return Ok(()) };
        let has_members = !cell.group.borrow().members.is_empty();
        if member_epoch != 0 {
            return Err(GroupError::GroupIdNotFound);
        }
        let image = self.view.current();
        let converted = if has_members {
            if !self.config.consumer.migration_policy.upgrades() {
                return Err(GroupError::GroupIdNotFound);
            }
            let group = cell.group.borrow();
            if group.members.len() > self.config.consumer.members_max {
                return Err(GroupError::GroupIdNotFound);
            }
            Some(classic::from_classic(&group, &*image).ok_or(GroupError::GroupIdNotFound)?)
        } else {
            None
        };
        let mut batch = Vec::new();
        if cell.group.borrow().stored_value.is_some() {
            batch.push((stored::key(group_id), None));
        }
        let converted = converted.unwrap_or_default();
        batch.extend(converted.iter().map(|record| records::encode(group_id, record)));
        let _guard = self.offsets_lock.lock().await;
        if !batch.is_empty() {
            self.append_records(group_id, &batch).await.map_err(coordinator_error)?;
        }
        self.groups.borrow_mut().remove(group_id);
        cell.notify();
        if !converted.is_empty() {
            let mut group = ConsumerGroup::new(group_id);
            for record in &converted {
                let applied = group.apply(record);
                assert!(applied.is_ok(), "group {group_id}: {applied:?}");
            }
            let new_cell = Rc::new(ConsumerCell::with(group));
            self.consumer_groups.borrow_mut().insert(group_id.to_string(), new_cell);
            self.arm_loaded_consumer_groups();
            tracing::info!(group = group_id, "classic group converted to a consumer group");
        }
        Ok(())
    }

    /// JoinGroup for a consumer group: an empty one gives way to a classic group (`None`:
    /// go on as classic), one with members takes the caller as a classic member.
    pub(super) async fn classic_join_consumer_group(
        &self,
        join: &JoinRequest,
    ) -> Option<JoinOutcome> {
        let cell = self.consumer_cell(&join.group)?;
        let _turn = cell.turn.lock().await;
        if cell.group.borrow().members.is_empty() {
            let tombstones = cell.group.borrow().tombstones();
            if let Err(error) = self.append_consumer(&join.group, &cell, &tombstones).await {
                return Some(JoinOutcome { member_id: join.member_id.clone(), result: Err(error) });
            }
            self.consumer_groups.borrow_mut().remove(&join.group);
            return None;
        }
        let mut join = join.clone();
        if join.member_id.is_empty() {
            join.member_id = format!("{}-{}", join.client_id, uuid::Uuid::new_v4());
            if join.version >= 4 && join.instance_id.is_none() {
                return Some(JoinOutcome {
                    member_id: join.member_id,
                    result: Err(GroupError::MemberIdRequired),
                });
            }
        }
        let image = self.view.current();
        let step = {
            let group = cell.group.borrow();
            let now_ms = self.clock.now_ms();
            classic::classic_join(&group, &join, &*image, &self.config.consumer, now_ms)
        };
        let (records, joined) = match step {
            Ok(step) => step,
            Err(error) => {
                return Some(JoinOutcome { member_id: join.member_id, result: Err(error) })
            }
        };
        if let Err(error) = self.append_consumer(&join.group, &cell, &records).await {
            return Some(JoinOutcome { member_id: join.member_id, result: Err(error) });
        }
        let ClassicJoined { member_id, generation, protocol } = joined;
        self.arm_timers(&mut cell.group.borrow_mut(), &member_id);
        let result = Ok(Joined {
            generation,
            protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
            protocol,
            leader: String::new(),
            members: Vec::new(),
        });
        Some(JoinOutcome { member_id, result })
    }

    /// SyncGroup of a classic member of a consumer group.
    pub(super) fn classic_sync_consumer_group(
        &self,
        cell: &ConsumerCell,
        member_id: &str,
        generation: i32,
    ) -> Result<Assignment, GroupError> {
        let image = self.view.current();
        let (assignment, protocol) =
            classic::classic_sync(&cell.group.borrow(), member_id, generation, &*image)?;
        self.arm_timers(&mut cell.group.borrow_mut(), member_id);
        Ok(Assignment { assignment, protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(), protocol })
    }

    /// Heartbeat of a classic member of a consumer group (its session restarts either way).
    pub(super) fn classic_heartbeat_consumer_group(
        &self,
        cell: &ConsumerCell,
        member_id: &str,
        generation: i32,
    ) -> Result<(), GroupError> {
        let answer = classic::classic_heartbeat(&cell.group.borrow(), member_id, generation);
        if !matches!(answer, Err(GroupError::UnknownMemberId | GroupError::IllegalGeneration)) {
            self.arm_timers(&mut cell.group.borrow_mut(), member_id);
        }
        answer
    }

    /// LeaveGroup of classic members of a consumer group: each is fenced.
    pub(super) async fn classic_leave_consumer_group(
        &self,
        group_id: &str,
        cell: Rc<ConsumerCell>,
        members: &[(String, Option<String>)],
    ) -> Vec<Result<(), GroupError>> {
        let mut answers = Vec::new();
        for (member_id, instance) in members {
            let _turn = cell.turn.lock().await;
            let found = {
                let group = cell.group.borrow();
                match instance.as_deref() {
                    Some(instance) => match group.static_member(instance) {
                        Some(m) if member_id.is_empty() || m.id() == member_id => {
                            Ok(m.id().to_string())
                        }
                        Some(_) => Err(GroupError::FencedInstanceId),
                        None => Err(GroupError::UnknownMemberId),
                    },
                    None if group.members.contains_key(member_id) => Ok(member_id.clone()),
                    None => Err(GroupError::UnknownMemberId),
                }
            };
            let answer = match found {
                Ok(id) => {
                    let image = self.view.current();
                    let fenced = consumer::fence(&cell.group.borrow(), &id, &*image);
                    self.append_consumer(group_id, &cell, &fenced).await
                }
                Err(error) => Err(error),
            };
            answers.push(answer);
        }
        self.maybe_downgrade(group_id, &cell).await;
        answers
    }

    /// After a member left or was fenced: a consumer group whose members all use the classic
    /// protocol becomes a classic group again (when the policy allows downgrades), every
    /// member keeping its assignment at a generation equal to the group epoch.
    pub(super) async fn maybe_downgrade(&self, group_id: &str, cell: &Rc<ConsumerCell>) {
        let stored = {
            let group = cell.group.borrow();
            let all_classic =
                !group.members.is_empty() && group.members.values().all(|m| m.is_classic());
            if !all_classic || !self.config.consumer.migration_policy.downgrades() {
                return;
            }
            let image = self.view.current();
            match classic::to_classic(&group, &*image) {
                Some(stored) => stored,
                None => return,
            }
        };
        let _turn = cell.turn.lock().await;
        let tombstones = cell.group.borrow().tombstones();
        if let Err(error) = self.append_consumer(group_id, cell, &tombstones).await {
            tracing::warn!(group = group_id, %error, "downgrading a consumer group failed");
            return;
        }
        self.consumer_groups.borrow_mut().remove(group_id);
        let group = stored.into_group(self.clock.now());
        self.groups.borrow_mut().insert(group_id.to_string(), Rc::new(GroupCell::with(group)));
        if let Err(error) = self.store_group(group_id).await {
            tracing::warn!(group = group_id, %error, "storing the downgraded group failed; will retry");
        }
        tracing::info!(group = group_id, "consumer group converted back to a classic group");
    }
}

fn coordinator_error(error: BrokerError) -> GroupError {
    match error {
        BrokerError::Group(error) => error,
        other => {
            tracing::warn!(%other, "appending a group conversion failed");
            GroupError::CoordinatorNotAvailable
        }
    }
}
