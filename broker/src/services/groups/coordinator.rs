//! Group requests on the coordinating shard: the state machine's steps plus the waiting
//! (a join until its generation forms, a sync until the group is Stable) and the storing (the
//! leader's sync writes the generation before anyone gets an assignment).

use super::state_machine::{check_join_request, JoinOutcome, JoinRequest, JoinStep, SyncStep};
use super::state_machine::{Assignment, State};
use super::{GroupCell, GroupService, GROUP_TICK_MS};
use crate::error::GroupError;
use bytes::Bytes;
use shard::io::Storage;
use std::time::Duration;

/// How long past its rebalance timeout a join waits for its generation before giving up.
const JOIN_PATIENCE_EXTRA_MS: u64 = 5000;
/// How long a sync waits for the leader's assignments.
const SYNC_WAIT_MS_MAX: u64 = 60_000;

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it: Dead when unknown, Empty when only offsets remain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<DescribedMember>,
    /// A KIP-848 consumer group or a KIP-932 share group: DescribeGroups answers it as Dead
    /// (v6: GROUP_ID_NOT_FOUND), as Kafka does a group of another type.
    pub consumer_group: bool,
}

impl<S: Storage> GroupService<S> {
    /// Waits until `cell` changes or `wait` passes (the timer re-checks deadlines anyway).
    async fn wait_for_change(&self, cell: &GroupCell, wait: Duration) {
        let listener = cell.changed.listen();
        futures_lite::future::or(
            async {
                listener.await;
            },
            shard::runtime::sleep(wait.min(Duration::from_millis(GROUP_TICK_MS * 2))),
        )
        .await;
    }

    pub(super) async fn join(&self, request: JoinRequest) -> JoinOutcome {
        if let Err(error) = check_join_request(&request) {
            return JoinOutcome { member_id: request.member_id, result: Err(error) };
        }
        let cell = self.cell_or_new(&request.group);
        let step = cell.group.borrow_mut().join(
            &request,
            self.clock.now(),
            self.config.initial_rebalance_delay_ms,
        );
        cell.notify();
        let member_id = match step {
            JoinStep::Done(outcome) => return outcome,
            JoinStep::Wait { member_id } => member_id,
        };
        let patience_ms = request.rebalance_timeout_ms.max(request.session_timeout_ms).max(0)
            as u64
            + JOIN_PATIENCE_EXTRA_MS;
        let give_up = self.clock.now() + Duration::from_millis(patience_ms);
        loop {
            if let Some(outcome) = cell.group.borrow().join_outcome(&member_id) {
                return outcome;
            }
            let now = self.clock.now();
            if now >= give_up {
                return JoinOutcome { member_id, result: Err(GroupError::RebalanceInProgress) };
            }
            self.wait_for_change(&cell, give_up - now).await;
        }
    }

    pub(super) async fn sync(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<Assignment, GroupError> {
        let cell = self.cell(group_id).ok_or(GroupError::UnknownMemberId)?;
        let step = cell.group.borrow_mut().sync(
            member_id,
            instance,
            generation,
            assignments,
            self.clock.now(),
        )?;
        if step == SyncStep::Store {
            // The generation is durable before anyone gets its assignment (Kafka stores the
            // group before answering SyncGroup), so a restarted coordinator keeps it Stable.
            let stored = self.store_group(group_id).await;
            let took = cell.group.borrow_mut().stored(generation, stored.is_ok(), self.clock.now());
            cell.notify();
            if stored.is_ok() {
                self.stats.classic_rebalance(took.map(|d| d.as_micros() as u64));
            }
            if let Err(error) = stored {
                tracing::warn!(group = group_id, %error, "storing the group failed; rebalancing");
                return Err(GroupError::StoreFailed(error.to_string()));
            }
        }
        cell.notify();
        let give_up = self.clock.now() + Duration::from_millis(SYNC_WAIT_MS_MAX);
        loop {
            if let Some(outcome) = cell.group.borrow().sync_outcome(member_id, generation) {
                return outcome;
            }
            let now = self.clock.now();
            if now >= give_up {
                return Err(GroupError::RebalanceInProgress);
            }
            self.wait_for_change(&cell, give_up - now).await;
        }
    }

    pub(super) fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        let cell = self.cell(group_id).ok_or(GroupError::UnknownMemberId)?;
        let answer =
            cell.group.borrow_mut().heartbeat(member_id, instance, generation, self.clock.now());
        answer
    }

    pub(super) fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Vec<Result<(), GroupError>> {
        let Some(cell) = self.cell(group_id) else {
            return members.iter().map(|_| Err(GroupError::UnknownMemberId)).collect();
        };
        let answers = cell.group.borrow_mut().leave_members(members, self.clock.now());
        cell.notify();
        answers
    }

    /// A commit's member and generation against the group (a member's commit refreshes its
    /// session); a group this shard does not know takes only standalone commits (no member id,
    /// a negative generation). A KIP-848 consumer group checks member epochs instead
    /// (`api_version`: the OffsetCommit version; None for TxnOffsetCommit).
    pub(super) fn check_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        api_version: Option<i16>,
    ) -> Result<(), GroupError> {
        if !super::valid_group_id(group_id) {
            return Err(GroupError::InvalidGroupId);
        }
        if let Some(cell) = self.consumer_cell(group_id) {
            return self.check_consumer_commit(&cell, member_id, generation, api_version);
        }
        match self.cell(group_id) {
            // A member's commit counts as its heartbeat, hence the mutable borrow.
            Some(cell) => cell.group.borrow_mut().check_commit(
                member_id,
                instance,
                generation,
                self.clock.now(),
            ),
            // Kafka (`OffsetMetadataManager.validateOffsetCommit`, before v9): a generation
            // for a group it does not know is ILLEGAL_GENERATION.
            // v9+ (KIP-848): the group is not found.
            None if generation >= 0 && api_version.is_some_and(|v| v >= 9) => {
                Err(GroupError::GroupIdNotFound)
            }
            None if generation >= 0 => Err(GroupError::IllegalGeneration),
            // A negative generation is a commit outside group management (an admin client,
            // or an assign() consumer: librdkafka's KIP-848 consumer sends its member id with
            // epoch -1), taken for the group as a "simple" group, as Kafka.
            None => Ok(()),
        }
    }

    pub(super) fn describe(&self, group_id: &str) -> Described {
        if self.consumer_cell(group_id).is_some() || self.is_share_group(group_id) {
            return Described {
                state: "Dead",
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
                consumer_group: true,
            };
        }
        let Some(cell) = self.cell(group_id) else {
            let has_offsets = self.offsets.borrow().contains_key(group_id);
            return Described {
                state: if has_offsets { State::Empty.name() } else { "Dead" },
                protocol_type: if has_offsets { "consumer".into() } else { String::new() },
                protocol: String::new(),
                members: Vec::new(),
                consumer_group: false,
            };
        };
        let group = cell.group.borrow();
        // Kafka fills the protocol, metadata and assignments only for a Stable group
        // (`describeNoMetadata` otherwise).
        let stable = group.state == State::Stable;
        let members = group
            .members
            .values()
            .map(|m| DescribedMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable { m.metadata_for(&group.protocol) } else { Bytes::new() },
                assignment: if stable { m.assignment.clone() } else { Bytes::new() },
            })
            .collect();
        Described {
            state: group.state.name(),
            protocol_type: group.protocol_type.clone(),
            protocol: if stable { group.protocol.clone() } else { String::new() },
            members,
            consumer_group: false,
        }
    }
}
