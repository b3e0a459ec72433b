//! A member's next current assignment on its way to its target (Kafka's
//! `CurrentAssignmentBuilder`): partitions it must give up are first moved to "pending
//! revocation" and the member stays at its epoch until a heartbeat shows it no longer owns
//! them; partitions another member still owns are withheld ("unreleased") until that member
//! let them go. So a partition is never in two members' assigned or pending sets.
//! Runs on: the shard coordinating the group (pure).
//! References: KIP-848 "Reconciliation", Kafka `CurrentAssignmentBuilder` (4.x; the epoch kept
//! after a completed revocation is trunk's).

use super::group::Member;
use super::records::{CurrentAssignment, MemberState, Partitions, TopicId};
use crate::error::GroupError;

/// What reconciliation needs besides the member.
pub struct Target<'a> {
    pub epoch: i32,
    pub partitions: &'a Partitions,
}

/// The member's next current assignment. `owned` is what the member's heartbeat says it owns
/// (`None`: not sent, so it may still own everything); `owned_by_other` says whether another
/// member holds a partition now.
pub fn reconcile(
    member: &Member,
    target: Target<'_>,
    owned: Option<&Partitions>,
    owned_by_other: &dyn Fn(&TopicId, i32) -> bool,
) -> Result<CurrentAssignment, GroupError> {
    let next = |epoch: i32| compute_next(member, epoch, &target, owned, owned_by_other);
    match member.state {
        MemberState::Stable if member.epoch != target.epoch => Ok(next(member.epoch)),
        MemberState::Stable => Ok(member.current()),
        MemberState::UnrevokedPartitions => {
            if still_owns_any(owned, &member.pending_revocation) {
                Ok(member.current())
            } else {
                Ok(next(member.epoch))
            }
        }
        MemberState::UnreleasedPartitions => Ok(next(member.epoch)),
        MemberState::Unknown => match owned {
            Some(owned) if owned.values().all(|p| p.is_empty()) => Ok(next(target.epoch)),
            _ => Err(GroupError::FencedMemberEpoch),
        },
    }
}

/// Whether the member (by its heartbeat) still owns any of `partitions`.
fn still_owns_any(owned: Option<&Partitions>, partitions: &Partitions) -> bool {
    let Some(owned) = owned else {
        return partitions.values().any(|p| !p.is_empty());
    };
    partitions.iter().any(|(topic, wanted)| {
        owned.get(topic).is_some_and(|have| wanted.iter().any(|p| have.contains(p)))
    })
}

fn compute_next(
    member: &Member,
    stay_epoch: i32,
    target: &Target<'_>,
    owned: Option<&Partitions>,
    owned_by_other: &dyn Fn(&TopicId, i32) -> bool,
) -> CurrentAssignment {
    let mut keep = Partitions::new();
    let mut revoke = Partitions::new();
    let mut add = Partitions::new();
    let mut unreleased = false;
    let topics: std::collections::BTreeSet<&TopicId> =
        member.assigned.keys().chain(target.partitions.keys()).collect();
    let empty = Default::default();
    for topic in topics {
        let assigned = member.assigned.get(topic).unwrap_or(&empty);
        let wanted = target.partitions.get(topic).unwrap_or(&empty);
        for partition in assigned {
            let side = if wanted.contains(partition) { &mut keep } else { &mut revoke };
            side.entry(*topic).or_default().insert(*partition);
        }
        for partition in wanted.difference(assigned) {
            if owned_by_other(topic, *partition) {
                unreleased = true;
            } else {
                add.entry(*topic).or_default().insert(*partition);
            }
        }
    }
    let mut next = CurrentAssignment {
        member_id: member.id().to_string(),
        member_epoch: target.epoch,
        previous_member_epoch: member.epoch,
        state: MemberState::Stable,
        assigned: keep,
        pending_revocation: Partitions::new(),
    };
    if !revoke.is_empty() && still_owns_any(owned, &revoke) {
        next.member_epoch = stay_epoch;
        next.state = MemberState::UnrevokedPartitions;
        next.pending_revocation = revoke;
        return next;
    }
    for (topic, partitions) in add {
        next.assigned.entry(topic).or_default().extend(partitions);
    }
    if unreleased {
        next.state = MemberState::UnreleasedPartitions;
    }
    next
}
