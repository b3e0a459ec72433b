//! KIP-932 share groups on the group coordinator: membership through ShareGroupHeartbeat and
//! the broker's simple assignor. The records themselves are handed out by the share partitions
//! on the partition leaders (`services::shares`); the coordinator only says which partitions
//! each member fetches from.
//!
//! Pure, no I/O and no clock of its own (`now_ms` is passed in): a heartbeat changes the group
//! and answers; the coordinator (`share_coordinator`) runs it on the group's shard.
//!
//! Rules (Kafka `GroupMetadataManager.shareGroupHeartbeat`, 4.x):
//! - epoch 0 joins (or re-joins with a known member id, as after a lost answer) with its
//!   subscribed topic names; -1 leaves; any other epoch must be the member's current one
//!   (FENCED_MEMBER_EPOCH), and its member must exist (UNKNOWN_MEMBER_ID).
//! - A join, a leave, a changed subscription or a change to a subscribed topic's partitions
//!   bumps the group epoch and computes a new target assignment at once: share groups have no
//!   revocation (partitions are shared), so every member moves to the new epoch at its next
//!   heartbeat and is sent its assignment then.
//! - Only initialized share partitions are assigned (Kafka's `withTopicAssignablePartitionsMap`
//!   over `initializedTopics`): a subscribed partition not yet in the group's state index is
//!   initialized first (the coordinator writes the index), and the first heartbeat after that
//!   assigns it (Kafka's `initializedAssignmentPending` bumps the epoch). So members that join
//!   together, as a group's consumers starting at once do, are assigned together, instead of
//!   the first one acquiring every record before the others arrive. A member waiting on such
//!   partitions is asked to heartbeat again within `INITIALIZING_HEARTBEAT_INTERVAL_MS`.
//! - The simple assignor (Kafka's `SimpleAssignor`): per topic, its subscribers in member-id
//!   order over its assignable partitions; with at least as many partitions as subscribers,
//!   the p-th partition goes to subscriber p mod n; with more subscribers than partitions,
//!   subscriber i gets the (i mod p)-th partition, so every member has a partition and every
//!   partition a member.
//! - A member whose session passes without a heartbeat is removed, as a leave.
//!
//! Membership is kept in memory (a decision in ARCHITECTURE.md: members re-join after the
//! coordinator moves; the delivery state they share is the share partitions', not the
//! coordinator's).
//! Invariants: member epoch ≤ group epoch; assignment epoch = group epoch after each step;
//! every target partition is in the state index; after a step, every initialized partition of
//! a subscribed topic is assigned to at least one subscriber.
//! Runs on: the shard that leads the group's `__consumer_offsets` partition.
//! References: KIP-932 ("Share group membership"); Kafka `SimpleAssignor`,
//! `ShareGroupHeartbeatRequest.json`.

use super::consumer::{Partitions, TopicId, Topics};
use super::share_records::{self, StateIndex};
use crate::error::GroupError;
use std::collections::{BTreeMap, BTreeSet};

/// Epoch of a member leaving the group.
pub const LEAVE_EPOCH: i32 = -1;
/// ListGroups' type of a share group.
pub const SHARE_GROUP_TYPE: &str = "share";
/// The assignor Kafka names in ShareGroupDescribe.
pub const SIMPLE_ASSIGNOR: &str = "simple";

/// The coordinator's settings for share groups (`group.share.*`), with a group's own
/// `share.*` configs in place of the broker's (`for_group`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareConfig {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub members_max: usize,
}

/// strata's share-group heartbeat interval (Kafka's `group.share.heartbeat.interval.ms` is
/// 5,000 ms): a member learns of a new assignment at its next heartbeat, and until then the
/// members that joined first fetch from every partition, so this bounds how soon the load
/// spreads over a group that grows (as strata's 2 s for KIP-848 groups); a heartbeat that
/// changes nothing writes nothing.
pub const HEARTBEAT_INTERVAL_MS_DEFAULT: i32 = 2_000;

/// The interval a member is answered with while partitions it subscribes to are being
/// initialized (Kafka waits for its next regular heartbeat, 5 s): the index write takes
/// milliseconds, and the member is then assigned at this next heartbeat.
pub const INITIALIZING_HEARTBEAT_INTERVAL_MS: i32 = 500;

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS_DEFAULT,
            members_max: 200,
        }
    }
}

impl ShareConfig {
    pub fn for_group(&self, overrides: Option<&BTreeMap<String, String>>) -> Self {
        let mut config = self.clone();
        let value = |key: &str| overrides.and_then(|o| o.get(key)).and_then(|v| v.parse().ok());
        if let Some(ms) = value("share.session.timeout.ms") {
            config.session_timeout_ms = ms;
        }
        if let Some(ms) = value("share.heartbeat.interval.ms") {
            config.heartbeat_interval_ms = ms;
        }
        config
    }
}

/// A ShareGroupHeartbeat as the coordinator takes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareHeartbeat {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// None: unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// The answer to a heartbeat that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, when it is sent (it joined or its assignment changed).
    pub assignment: Option<Partitions>,
}

/// A member of a share group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: String,
    pub epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: BTreeSet<String>,
    /// Its assignment at its epoch (what it was last sent).
    pub assignment: Partitions,
    /// When its session ends unless it heartbeats.
    pub session_deadline_ms: i64,
}

/// A share group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareGroup {
    pub group_id: String,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    /// Each member's target assignment at `assignment_epoch`.
    pub targets: BTreeMap<String, Partitions>,
    /// The partition counts of the subscribed topics the targets were computed from.
    pub topics_seen: BTreeMap<String, Option<(TopicId, i32)>>,
    /// The share partitions the group may have state on, as last written to
    /// `__consumer_offsets` (`share_records`): every partition ever assigned, or given offsets
    /// by a tool, until DeleteShareGroupOffsets or DeleteGroups deletes their state.
    /// Set through `set_state_index` only, so `index_version` follows it.
    pub state_index: StateIndex,
    /// Bumped at every change of `state_index`; `targets_index_version` is its value when the
    /// targets were computed, so a heartbeat sees an index change without comparing the two.
    index_version: u64,
    targets_index_version: u64,
    /// Whether the group's records are in `__consumer_offsets` (a deletion writes tombstones).
    pub stored: bool,
}

impl ShareGroup {
    pub fn new(group_id: &str) -> Self {
        ShareGroup { group_id: group_id.to_string(), ..ShareGroup::default() }
    }

    /// Kafka's share-group states: Empty without members, else Stable (no rebalance waits on
    /// a member).
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    /// The state index with every partition of the subscribed topics added, when that adds
    /// any: what the coordinator writes to initialize them before they can be assigned.
    pub fn index_with_subscriptions(&self) -> Option<StateIndex> {
        let mut subscribed = StateIndex::new();
        for (name, seen) in &self.topics_seen {
            let Some((topic_id, count)) = *seen else { continue };
            let topic = subscribed.entry(topic_id).or_default();
            topic.name = name.clone();
            topic.partitions.extend(0..count.max(0));
        }
        let mut index = self.state_index.clone();
        share_records::merge(&mut index, &subscribed).then_some(index)
    }

    /// Whether some partition `member_id` subscribes to is not initialized yet.
    fn initializing(&self, member_id: &str) -> bool {
        let Some(member) = self.members.get(member_id) else { return false };
        member.subscribed.iter().any(|name| {
            let Some(Some((topic_id, count))) = self.topics_seen.get(name) else { return false };
            let initialized = self.state_index.get(topic_id).map(|topic| &topic.partitions);
            (0..*count).any(|p| !initialized.is_some_and(|set| set.contains(&p)))
        })
    }

    /// The state index changed since the targets were computed (partitions were initialized,
    /// or their state deleted): Kafka's `initializedAssignmentPending`.
    fn initialized_assignment_pending(&self) -> bool {
        self.index_version != self.targets_index_version
    }

    /// Replaces the state index (the coordinator wrote or replayed it); the next heartbeat
    /// assigns from it.
    pub fn set_state_index(&mut self, index: StateIndex) {
        if index != self.state_index {
            self.state_index = index;
            self.index_version += 1;
        }
    }

    /// Every topic some member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members.values().flat_map(|member| member.subscribed.iter().cloned()).collect()
    }

    /// The topics the targets were computed from differ from the cluster's now.
    fn topics_changed(&self, topics: &dyn Topics) -> bool {
        let now: BTreeMap<String, Option<(TopicId, i32)>> =
            self.subscribed_topics().into_iter().map(|t| (t.clone(), topics.by_name(&t))).collect();
        now != self.topics_seen
    }

    /// A new group epoch and target assignment (a member joined or left, a subscription or a
    /// subscribed topic changed).
    fn reassign(&mut self, topics: &dyn Topics) {
        self.epoch += 1;
        self.topics_seen =
            self.subscribed_topics().into_iter().map(|t| (t.clone(), topics.by_name(&t))).collect();
        self.targets = simple_assign(&self.members, topics, &self.state_index);
        self.targets_index_version = self.index_version;
        self.assignment_epoch = self.epoch;
    }

    /// Removes `member_id` (a leave or an expired session), reassigning the others.
    pub fn remove(&mut self, member_id: &str, topics: &dyn Topics) -> bool {
        if self.members.remove(member_id).is_none() {
            return false;
        }
        self.reassign(topics);
        true
    }

    /// Members whose session passed by `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Vec<String> {
        self.members
            .values()
            .filter(|member| member.session_deadline_ms <= now_ms)
            .map(|member| member.member_id.clone())
            .collect()
    }

    /// A member's heartbeat; the group changes only when it answers Ok.
    pub fn heartbeat(
        &mut self,
        request: &ShareHeartbeat,
        topics: &dyn Topics,
        config: &ShareConfig,
        now_ms: i64,
    ) -> Result<ShareHeartbeatAnswer, GroupError> {
        let answer =
            |member_id: &str, epoch: i32, assignment: Option<Partitions>| ShareHeartbeatAnswer {
                member_id: member_id.to_string(),
                member_epoch: epoch,
                heartbeat_interval_ms: config.heartbeat_interval_ms,
                assignment,
            };
        if request.member_epoch == LEAVE_EPOCH {
            if !self.members.contains_key(&request.member_id) {
                return Err(GroupError::UnknownMemberId);
            }
            self.remove(&request.member_id, topics);
            return Ok(answer(&request.member_id, LEAVE_EPOCH, None));
        }
        let known = self.members.get(&request.member_id);
        match known {
            None if request.member_epoch != 0 => return Err(GroupError::UnknownMemberId),
            None if self.members.len() >= config.members_max => {
                return Err(GroupError::GroupMaxSizeReached)
            }
            Some(member) if request.member_epoch != 0 && request.member_epoch != member.epoch => {
                return Err(GroupError::FencedMemberEpoch)
            }
            _ => {}
        }
        let joining = request.member_epoch == 0;
        let session_deadline_ms = now_ms.saturating_add(i64::from(config.session_timeout_ms));
        let mut changed = known.is_none();
        let member = self.members.entry(request.member_id.clone()).or_insert_with(|| ShareMember {
            member_id: request.member_id.clone(),
            epoch: 0,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed: BTreeSet::new(),
            assignment: Partitions::new(),
            session_deadline_ms,
        });
        member.session_deadline_ms = session_deadline_ms;
        member.rack_id = request.rack_id.clone().or(member.rack_id.take());
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        if let Some(names) = &request.subscribed_topic_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            if names != member.subscribed {
                member.subscribed = names;
                changed = true;
            }
        }
        if changed || self.topics_changed(topics) || self.initialized_assignment_pending() {
            self.reassign(topics);
        }
        let target = self.targets.get(&request.member_id).cloned().unwrap_or_default();
        let epoch = self.assignment_epoch;
        let Some(member) = self.members.get_mut(&request.member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        let send = joining || member.epoch != epoch || member.assignment != target;
        member.epoch = epoch;
        member.assignment = target.clone();
        let mut answer = answer(&request.member_id, epoch, send.then_some(target));
        if self.initializing(&request.member_id) {
            answer.heartbeat_interval_ms =
                answer.heartbeat_interval_ms.min(INITIALIZING_HEARTBEAT_INTERVAL_MS);
        }
        Ok(answer)
    }
}

/// The checks Kafka makes before a share heartbeat touches a group.
pub fn validate(request: &ShareHeartbeat) -> Result<(), GroupError> {
    let invalid = |message: &str| Err(GroupError::InvalidRequest(message.to_string()));
    if request.group_id.trim().is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if request.member_id.trim().is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if request.member_id.len() > 36 * 4 {
        return invalid("MemberId is too long.");
    }
    if request.rack_id.as_deref().is_some_and(|rack| rack.trim().is_empty()) {
        return invalid("RackId can't be empty.");
    }
    match request.member_epoch {
        0 if request.subscribed_topic_names.as_ref().is_none_or(|names| names.is_empty()) => {
            invalid("SubscribedTopicNames must be set in first request.")
        }
        epoch if epoch < LEAVE_EPOCH => invalid("MemberEpoch is invalid."),
        _ => Ok(()),
    }
}

/// Kafka's simple share assignor: per topic, its assignable partitions (those initialized in
/// `initialized`) spread over its subscribers in member-id order; with more subscribers than
/// partitions each subscriber gets one partition and partitions are shared.
pub fn simple_assign(
    members: &BTreeMap<String, ShareMember>,
    topics: &dyn Topics,
    initialized: &StateIndex,
) -> BTreeMap<String, Partitions> {
    let mut targets: BTreeMap<String, Partitions> =
        members.keys().map(|id| (id.clone(), Partitions::new())).collect();
    let mut subscribers: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for member in members.values() {
        for topic in &member.subscribed {
            subscribers.entry(topic.clone()).or_default().push(&member.member_id);
        }
    }
    for (topic, ids) in subscribers {
        let Some((topic_id, count)) = topics.by_name(&topic) else { continue };
        let Some(state) = initialized.get(&topic_id) else { continue };
        let partitions: Vec<i32> = state.partitions.range(0..count.max(0)).copied().collect();
        if partitions.is_empty() {
            continue;
        }
        for index in 0..partitions.len().max(ids.len()) {
            let (member, partition) =
                (ids[index % ids.len()], partitions[index % partitions.len()]);
            let target = targets.entry(member.to_string()).or_default();
            target.entry(topic_id).or_default().insert(partition);
        }
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::groups::consumer::TopicMap;

    fn topics(counts: &[(&str, i32)]) -> TopicMap {
        let mut map = TopicMap::default();
        for (index, (name, count)) in counts.iter().enumerate() {
            map.topics.insert(name.to_string(), ([index as u8 + 1; 16], *count));
        }
        map
    }

    fn join(group: &mut ShareGroup, member: &str, topics: &TopicMap) -> ShareHeartbeatAnswer {
        let request = ShareHeartbeat {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: 0,
            subscribed_topic_names: Some(vec!["t".into()]),
            ..ShareHeartbeat::default()
        };
        group.heartbeat(&request, topics, &ShareConfig::default(), 0).unwrap()
    }

    /// What the coordinator does after a step: writes the index with the subscribed
    /// partitions (here: keeps it).
    fn initialize(group: &mut ShareGroup) {
        if let Some(index) = group.index_with_subscriptions() {
            group.set_state_index(index);
        }
    }

    fn beat(group: &mut ShareGroup, member: &str, topics: &TopicMap) -> ShareHeartbeatAnswer {
        let epoch = group.members[member].epoch;
        let request = ShareHeartbeat {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            ..ShareHeartbeat::default()
        };
        group.heartbeat(&request, topics, &ShareConfig::default(), 0).unwrap()
    }

    #[test]
    fn partitions_are_assigned_once_initialized_so_members_joining_together_share_them() {
        let topics = topics(&[("t", 4)]);
        let mut group = ShareGroup::new("g");
        let first = join(&mut group, "a", &topics);
        // Nothing is initialized yet: nothing assigned, and asked back soon.
        assert_eq!(first.assignment, Some(Partitions::new()));
        assert_eq!(first.heartbeat_interval_ms, INITIALIZING_HEARTBEAT_INTERVAL_MS);
        let index = group.index_with_subscriptions().unwrap();
        assert_eq!(index[&[1; 16]].partitions, BTreeSet::from([0, 1, 2, 3]));
        join(&mut group, "b", &topics);
        initialize(&mut group);
        assert_eq!(group.index_with_subscriptions(), None);
        // The next heartbeat of either member assigns the initialized partitions to both.
        let a = beat(&mut group, "a", &topics);
        assert_eq!(a.heartbeat_interval_ms, HEARTBEAT_INTERVAL_MS_DEFAULT);
        assert_eq!(a.assignment.unwrap()[&[1; 16]], BTreeSet::from([0, 2]));
        let b = beat(&mut group, "b", &topics);
        assert_eq!(b.assignment.unwrap()[&[1; 16]], BTreeSet::from([1, 3]));
        // Nothing pending: a heartbeat changes nothing.
        let epoch = group.epoch;
        assert_eq!(beat(&mut group, "a", &topics).assignment, None);
        assert_eq!(group.epoch, epoch);
    }

    #[test]
    fn more_members_than_partitions_each_get_a_partition_and_every_partition_is_read() {
        let topics = topics(&[("t", 3)]);
        let mut group = ShareGroup::new("g");
        for member in ["a", "b", "c", "d", "e"] {
            join(&mut group, member, &topics);
            initialize(&mut group);
        }
        assert_eq!(group.epoch, 5);
        let mut covered = BTreeSet::new();
        for target in group.targets.values() {
            let partitions = &target[&[1; 16]];
            assert_eq!(partitions.len(), 1);
            covered.extend(partitions.iter().copied());
        }
        assert_eq!(covered, BTreeSet::from([0, 1, 2]));
    }

    #[test]
    fn a_stale_epoch_is_fenced_and_an_unknown_member_refused() {
        let topics = topics(&[("t", 2)]);
        let mut group = ShareGroup::new("g");
        join(&mut group, "a", &topics);
        initialize(&mut group);
        let first = beat(&mut group, "a", &topics);
        join(&mut group, "b", &topics);
        let stale = ShareHeartbeat {
            group_id: "g".into(),
            member_id: "a".into(),
            member_epoch: first.member_epoch + 5,
            ..ShareHeartbeat::default()
        };
        let config = ShareConfig::default();
        assert_eq!(
            group.heartbeat(&stale, &topics, &config, 0),
            Err(GroupError::FencedMemberEpoch)
        );
        let beat = ShareHeartbeat { member_epoch: first.member_epoch, ..stale.clone() };
        let answer = group.heartbeat(&beat, &topics, &config, 0).unwrap();
        // "b" joined since: "a" moves to the new epoch with its smaller assignment.
        assert_eq!(answer.member_epoch, 3);
        assert_eq!(answer.assignment.unwrap()[&[1; 16]], BTreeSet::from([0]));
        let unknown = ShareHeartbeat { member_id: "z".into(), member_epoch: 4, ..stale };
        assert_eq!(
            group.heartbeat(&unknown, &topics, &config, 0),
            Err(GroupError::UnknownMemberId)
        );
    }
}
