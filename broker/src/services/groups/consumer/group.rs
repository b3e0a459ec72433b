//! A KIP-848 consumer group as its records make it: `apply` is the only mutator, used both
//! after a batch of the group's records is durable in `__consumer_offsets` and when the
//! partition is replayed, so the in-memory group is exactly what its log says.
//!
//! Besides the records' contents (group epoch, members, target assignment, regexes), the group
//! keeps two derived indexes rebuilt by `apply`: who owns each partition (a member's assigned
//! partitions and those pending revocation: never two owners, asserted), and how many members
//! subscribe to each topic name. Timers (sessions, rebalance deadlines) are not records: the
//! coordinator sets them after each change and anew when it loads the group.
//! Runs on: the shard coordinating the group.
//! References: Kafka `ConsumerGroup`, `ConsumerGroupMember`, `GroupMetadataManager.replay`.

use super::records::{CurrentAssignment, MemberMetadata, MemberState, Partitions, Record, TopicId};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// A member: its metadata (record 5) and its current assignment (record 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub meta: MemberMetadata,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    pub assigned: Partitions,
    pub pending_revocation: Partitions,
}

impl Member {
    /// A member that has metadata but no assignment record yet.
    pub fn new(meta: MemberMetadata) -> Self {
        Member {
            meta,
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: Partitions::new(),
            pending_revocation: Partitions::new(),
        }
    }

    pub fn id(&self) -> &str {
        &self.meta.member_id
    }

    /// Its current assignment as record 8 carries it.
    pub fn current(&self) -> CurrentAssignment {
        CurrentAssignment {
            member_id: self.meta.member_id.clone(),
            member_epoch: self.epoch,
            previous_member_epoch: self.previous_epoch,
            state: self.state,
            assigned: self.assigned.clone(),
            pending_revocation: self.pending_revocation.clone(),
        }
    }

    /// Reconciled: Stable at `target_epoch`.
    pub fn reconciled(&self, target_epoch: i32) -> bool {
        self.state == MemberState::Stable && self.epoch == target_epoch
    }

    /// Uses the classic protocol (joined with JoinGroup inside a consumer group).
    pub fn is_classic(&self) -> bool {
        self.meta.classic.is_some()
    }
}

/// A regular expression's topics, resolved against the metadata image at `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRegex {
    pub topics: Vec<String>,
    pub version: i64,
    pub timestamp_ms: i64,
}

/// Deadlines of a member (not records: set by the coordinator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    pub session: Instant,
    /// The rebalance timeout of a member asked to revoke partitions at this member epoch.
    pub revocation: Option<(i32, Instant)>,
}

/// The state of a consumer group, as DescribeGroups/ListGroups/ConsumerGroupDescribe name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroup {
    pub group_id: String,
    pub epoch: i32,
    pub metadata_hash: i64,
    /// The epoch of the target assignment (record 6; 0 before the first one).
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// The target assignment per member (record 7).
    pub targets: BTreeMap<String, Partitions>,
    pub regexes: BTreeMap<String, ResolvedRegex>,
    /// Derived: the member owning each partition (assigned or pending revocation).
    pub owners: HashMap<(TopicId, i32), String>,
    /// Derived: members subscribed to each topic name (names only; regexes are separate).
    pub subscribed_names: BTreeMap<String, usize>,
    /// Derived: member id of each static member's instance id.
    pub static_members: BTreeMap<String, String>,
    /// Timers per member (not part of the records; equality of groups ignores nothing, so
    /// tests compare groups with `records_equal`).
    pub deadlines: BTreeMap<String, Deadlines>,
    /// The metadata image version the subscription metadata was last checked at.
    pub checked_version: u64,
}

impl ConsumerGroup {
    pub fn new(group_id: &str) -> Self {
        ConsumerGroup { group_id: group_id.to_string(), ..ConsumerGroup::default() }
    }

    /// The group has records: an epoch (record 3, never 0 once written) or members. A group
    /// that is neither is being created by its first heartbeat, or was deleted.
    pub fn is_live(&self) -> bool {
        self.epoch > 0 || !self.members.is_empty()
    }

    pub fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if self.members.values().any(|m| !m.reconciled(self.assignment_epoch)) {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    /// The same records-derived state (timers and the checked version aside).
    pub fn records_equal(&self, other: &ConsumerGroup) -> bool {
        let strip = |group: &ConsumerGroup| ConsumerGroup {
            deadlines: BTreeMap::new(),
            checked_version: 0,
            ..group.clone()
        };
        strip(self) == strip(other)
    }

    /// The member holding `instance_id`.
    pub fn static_member(&self, instance_id: &str) -> Option<&Member> {
        self.static_members.get(instance_id).and_then(|id| self.members.get(id))
    }

    pub fn target_of(&self, member_id: &str) -> Partitions {
        self.targets.get(member_id).cloned().unwrap_or_default()
    }

    /// The owner of a partition other than `member_id`, if any.
    pub fn owned_by_other(&self, topic: &TopicId, partition: i32, member_id: &str) -> bool {
        self.owners.get(&(*topic, partition)).is_some_and(|owner| owner != member_id)
    }

    /// Applies one record (Kafka's replay). Tolerant of any order a log may hold: a record
    /// for a member that does not exist yet creates it. An assignment that gives a partition
    /// another member owns is applied (the newer record wins) and reported as an error: the
    /// coordinator asserts none happens on its own steps, replay logs it.
    pub fn apply(&mut self, record: &Record) -> Result<(), String> {
        match record {
            Record::GroupMetadata { epoch, metadata_hash } => {
                self.epoch = *epoch;
                self.metadata_hash = *metadata_hash;
            }
            Record::GroupMetadataTombstone => {
                let group_id = std::mem::take(&mut self.group_id);
                *self = ConsumerGroup::new(&group_id);
            }
            Record::PartitionMetadata | Record::PartitionMetadataTombstone => {}
            Record::Member(meta) => self.apply_member(meta),
            Record::MemberTombstone { member_id } => self.remove_member(member_id),
            Record::TargetMetadata { assignment_epoch } => {
                self.assignment_epoch = *assignment_epoch
            }
            Record::TargetMetadataTombstone => self.assignment_epoch = 0,
            Record::TargetMember { member_id, partitions } => {
                self.targets.insert(member_id.clone(), partitions.clone());
            }
            Record::TargetMemberTombstone { member_id } => {
                self.targets.remove(member_id);
            }
            Record::Current(current) => return self.apply_current(current),
            Record::CurrentTombstone { member_id } => {
                if let Some(member) = self.members.get(member_id) {
                    let cleared = CurrentAssignment {
                        member_id: member_id.clone(),
                        member_epoch: -1,
                        previous_member_epoch: member.previous_epoch,
                        state: MemberState::Stable,
                        assigned: Partitions::new(),
                        pending_revocation: Partitions::new(),
                    };
                    return self.apply_current(&cleared);
                }
            }
            Record::Regex { regex, topics, version, timestamp_ms } => {
                let resolved = ResolvedRegex {
                    topics: topics.clone(),
                    version: *version,
                    timestamp_ms: *timestamp_ms,
                };
                self.regexes.insert(regex.clone(), resolved);
            }
            Record::RegexTombstone { regex } => {
                self.regexes.remove(regex);
            }
        }
        Ok(())
    }

    fn apply_member(&mut self, meta: &MemberMetadata) {
        // The derived indexes: the old subscription and instance id out, the new ones in.
        if let Some(old) = self.members.get(&meta.member_id).map(|m| m.meta.clone()) {
            self.unindex(&old);
        }
        for name in &meta.subscribed_topic_names {
            *self.subscribed_names.entry(name.clone()).or_insert(0) += 1;
        }
        if let Some(instance) = &meta.instance_id {
            self.static_members.insert(instance.clone(), meta.member_id.clone());
        }
        match self.members.get_mut(&meta.member_id) {
            Some(member) => member.meta = meta.clone(),
            None => {
                self.members.insert(meta.member_id.clone(), Member::new(meta.clone()));
            }
        }
    }

    fn unindex(&mut self, meta: &MemberMetadata) {
        for name in &meta.subscribed_topic_names {
            decrement(&mut self.subscribed_names, name);
        }
        if let Some(instance) = &meta.instance_id {
            if self.static_members.get(instance) == Some(&meta.member_id) {
                self.static_members.remove(instance);
            }
        }
    }

    fn remove_member(&mut self, member_id: &str) {
        let Some(member) = self.members.remove(member_id) else { return };
        self.unindex(&member.meta);
        self.release_all(member_id, &member);
        self.deadlines.remove(member_id);
    }

    fn release_all(&mut self, member_id: &str, member: &Member) {
        for (topic, partitions) in member.assigned.iter().chain(member.pending_revocation.iter()) {
            for partition in partitions {
                if self.owners.get(&(*topic, *partition)).map(String::as_str) == Some(member_id) {
                    self.owners.remove(&(*topic, *partition));
                }
            }
        }
    }

    fn apply_current(&mut self, current: &CurrentAssignment) -> Result<(), String> {
        let member_id = current.member_id.clone();
        if !self.members.contains_key(&member_id) {
            let meta = MemberMetadata { member_id: member_id.clone(), ..MemberMetadata::default() };
            self.apply_member(&meta);
        }
        let Some(old) = self.members.get(&member_id).cloned() else { return Ok(()) };
        self.release_all(&member_id, &old);
        let mut conflict = None;
        for (topic, partitions) in current.assigned.iter().chain(current.pending_revocation.iter())
        {
            for partition in partitions {
                let previous = self.owners.insert((*topic, *partition), member_id.clone());
                // KIP-848's central rule: a partition is never owned by two members at once.
                if let Some(previous) = previous.filter(|p| *p != member_id) {
                    conflict = Some(format!(
                        "partition {partition} given to {member_id} while {previous} owns it"
                    ));
                }
            }
        }
        if let Some(member) = self.members.get_mut(&member_id) {
            member.epoch = current.member_epoch;
            member.previous_epoch = current.previous_member_epoch;
            member.state = current.state;
            member.assigned = current.assigned.clone();
            member.pending_revocation = current.pending_revocation.clone();
        }
        conflict.map_or(Ok(()), Err)
    }

    /// Every record that rebuilds this group from nothing, in an order `apply` accepts
    /// (compaction rewrites a group so).
    pub fn snapshot(&self) -> Vec<Record> {
        let mut records =
            vec![Record::GroupMetadata { epoch: self.epoch, metadata_hash: self.metadata_hash }];
        records.extend(self.members.values().map(|m| Record::Member(m.meta.clone())));
        records.extend(self.targets.iter().map(|(member_id, partitions)| Record::TargetMember {
            member_id: member_id.clone(),
            partitions: partitions.clone(),
        }));
        records.push(Record::TargetMetadata { assignment_epoch: self.assignment_epoch });
        records.extend(self.members.values().map(|m| Record::Current(m.current())));
        records.extend(self.regexes.iter().map(|(regex, resolved)| Record::Regex {
            regex: regex.clone(),
            topics: resolved.topics.clone(),
            version: resolved.version,
            timestamp_ms: resolved.timestamp_ms,
        }));
        records
    }

    /// The tombstones that delete this group (an Empty group being deleted).
    pub fn tombstones(&self) -> Vec<Record> {
        let mut records = Vec::new();
        for member_id in self.members.keys() {
            records.push(Record::CurrentTombstone { member_id: member_id.clone() });
            records.push(Record::TargetMemberTombstone { member_id: member_id.clone() });
        }
        records.push(Record::TargetMetadataTombstone);
        for member_id in self.members.keys() {
            records.push(Record::MemberTombstone { member_id: member_id.clone() });
        }
        for regex in self.regexes.keys() {
            records.push(Record::RegexTombstone { regex: regex.clone() });
        }
        records.push(Record::GroupMetadataTombstone);
        records
    }
}

fn decrement(counts: &mut BTreeMap<String, usize>, name: &str) {
    if let Some(count) = counts.get_mut(name) {
        *count -= 1;
        if *count == 0 {
            counts.remove(name);
        }
    }
}
