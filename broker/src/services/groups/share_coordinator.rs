//! KIP-932 share groups on the coordinating shard: the service side of `share`.
//!
//! A heartbeat runs the pure step under no await, so two never interleave. Members are kept in
//! memory (see `share`); the group tick removes members whose session passed. A group id
//! belongs to one kind of group: a share heartbeat for a classic or consumer group's id, and a
//! classic or consumer member for a share group's, is refused (GROUP_ID_NOT_FOUND).
//! Runs on: the shard that leads the group's `__consumer_offsets` partition.

use super::share::{ShareConfig, ShareGroup, ShareHeartbeat, ShareHeartbeatAnswer};
use super::GroupService;
use crate::error::GroupError;
use shard::io::Storage;

/// A share group as ShareGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedShareGroup {
    pub state: &'static str,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: Vec<super::share::ShareMember>,
}

impl<S: Storage> GroupService<S> {
    pub(super) fn is_share_group(&self, group_id: &str) -> bool {
        self.share_groups.borrow().contains_key(group_id)
    }

    fn share_config(&self, group_id: &str) -> ShareConfig {
        let image = self.view.current();
        self.config.share.for_group(image.group_configs.get(group_id))
    }

    /// ShareGroupHeartbeat (validated by the handler).
    pub(super) fn share_heartbeat(
        &self,
        request: ShareHeartbeat,
    ) -> Result<ShareHeartbeatAnswer, GroupError> {
        let group_id = request.group_id.clone();
        if !super::valid_group_id(&group_id) {
            return Err(GroupError::InvalidGroupId);
        }
        let other_kind = self.consumer_cell(&group_id).is_some()
            || self.cell(&group_id).is_some_and(|cell| !cell.group.borrow().members.is_empty());
        if other_kind {
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
        })
    }

    /// DeleteGroups of a share group: only without members.
    pub(super) fn delete_share_group(&self, group_id: &str) -> Option<Result<(), GroupError>> {
        let mut groups = self.share_groups.borrow_mut();
        let group = groups.get(group_id)?;
        if !group.members.is_empty() {
            return Some(Err(GroupError::NonEmptyGroup));
        }
        groups.remove(group_id);
        Some(Ok(()))
    }
}
