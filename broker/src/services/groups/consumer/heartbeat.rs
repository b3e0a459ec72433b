//! ConsumerGroupHeartbeat as a pure step: the group as it is and a request in; the records
//! to append and the answer out (nothing is changed here: the coordinator applies the records
//! once they are durable). Also leaving (epoch -1), a static member's temporary leave (-2), and
//! fencing a member whose session or rebalance timeout passed.
//!
//! A heartbeat: finds or creates the member (a static member's new incarnation takes over the
//! old one's place and partitions), updates its metadata, resolves its regex, bumps the group
//! epoch when subscriptions or the subscribed topics changed, computes a new target assignment
//! when the group epoch is ahead of it, and reconciles the member one step towards its target.
//! A member at epoch 0 with a known id is taken back (KAFKA-19233: the client lost its state,
//! or our answer). An answer carries the assignment when the member (re)joined, sent its full
//! state, or its assignment changed.
//! References: KIP-848; Kafka `GroupMetadataManager.consumerGroupHeartbeat` and
//! `GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid` (4.x).

use super::group::{ConsumerGroup, Member, ResolvedRegex};
use super::reconcile::{reconcile, Target};
use super::records::{CurrentAssignment, MemberMetadata, MemberState, Partitions, Record};
use super::{regex, ConsumerConfig, Topics};
use crate::error::GroupError;
use crate::services::groups::assignors::{Assignor, GroupSpec, MemberSpec};
use std::collections::{BTreeMap, BTreeSet};

/// Epoch of a member leaving the group.
pub const LEAVE_EPOCH: i32 = -1;
/// Epoch of a static member leaving for now (it keeps its partitions for its session).
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// The heartbeat interval answered to a member that is not yet at its target assignment.
pub const RECONCILING_HEARTBEAT_INTERVAL_MS: i32 = 250;

/// A ConsumerGroupHeartbeat as the coordinator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// None: unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// None: unchanged; "": no regex.
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns (None: unchanged since its last heartbeat).
    pub owned: Option<Partitions>,
    pub client_id: String,
    pub client_host: String,
    /// Who sent it (`User:alice`) and from where: a regex it resolves keeps only the topics
    /// this principal may DESCRIBE, as Kafka's coordinator filters them.
    pub principal: String,
    pub host: String,
}

/// Whether a topic (by name) may be described by the heartbeat's principal.
pub type Describable<'a> = &'a dyn Fn(&str) -> bool;

/// The answer to a heartbeat that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, when it is sent.
    pub assignment: Option<Partitions>,
}

/// Records to append, then the answer to give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub records: Vec<Record>,
    pub answer: HeartbeatAnswer,
}

fn invalid(message: &str) -> GroupError {
    GroupError::InvalidRequest(message.to_string())
}

fn blank(value: &Option<String>) -> bool {
    value.as_deref().is_some_and(|v| v.trim().is_empty())
}

/// The checks Kafka makes before a heartbeat touches any group, in Kafka's order.
pub fn validate(
    request: &HeartbeatRequest,
    version: i16,
    config: &ConsumerConfig,
) -> Result<(), GroupError> {
    let epoch = request.member_epoch;
    if request.member_id.trim().is_empty() && (version >= 1 || epoch > 0 || epoch == LEAVE_EPOCH) {
        return Err(invalid("MemberId can't be empty."));
    }
    if request.group_id.trim().is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    // Record keys hold these as i16-length strings.
    let longest = [&request.group_id, &request.member_id]
        .into_iter()
        .chain(request.instance_id.iter())
        .chain(request.subscribed_topic_regex.iter())
        .map(String::len)
        .max()
        .unwrap_or(0);
    if longest > super::records::KEY_STRING_BYTES_MAX {
        return Err(invalid("An id or regular expression is too long."));
    }
    if blank(&request.instance_id) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if blank(&request.rack_id) {
        return Err(invalid("RackId can't be empty."));
    }
    if epoch == 0 {
        if request.rebalance_timeout_ms == -1 {
            return Err(invalid("RebalanceTimeoutMs must be provided in first request."));
        }
        if request.owned.as_ref().is_none_or(|owned| owned.values().any(|p| !p.is_empty())) {
            return Err(invalid("TopicPartitions must be empty when (re-)joining."));
        }
        if request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none() {
            return Err(invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            ));
        }
    } else if epoch == STATIC_LEAVE_EPOCH && request.instance_id.is_none() {
        return Err(invalid("InstanceId can't be null."));
    } else if epoch < STATIC_LEAVE_EPOCH {
        return Err(invalid("MemberEpoch is invalid."));
    }
    if let Some(name) = request.server_assignor.as_deref() {
        if !config.assignors.iter().any(|a| a.name() == name) {
            let supported: Vec<&str> = config.assignors.iter().map(|a| a.name()).collect();
            return Err(GroupError::UnsupportedAssignor(format!(
                "ServerAssignor {name} is not supported. Supported assignors: {}.",
                supported.join(", ")
            )));
        }
    }
    if let Some(pattern) = request.subscribed_topic_regex.as_deref().filter(|p| !p.is_empty()) {
        regex::compile(pattern)?;
    }
    Ok(())
}

/// A heartbeat of a member joining or staying (epoch ≥ 0), or leaving (-1, -2).
pub fn heartbeat(
    group: Option<&ConsumerGroup>,
    request: &HeartbeatRequest,
    topics: &dyn Topics,
    config: &ConsumerConfig,
    now_ms: i64,
    describable: Describable<'_>,
) -> Result<Step, GroupError> {
    if request.member_epoch < 0 {
        let group = group.ok_or(GroupError::GroupIdNotFound)?;
        return leave(group, request, topics, config);
    }
    let created;
    let group = match group {
        Some(group) => group,
        None if request.member_epoch == 0 => {
            created = ConsumerGroup::new(&request.group_id);
            &created
        }
        None => return Err(GroupError::GroupIdNotFound),
    };
    let found = find_member(group, request, config)?;
    let mut step = Changes::default();
    if let Some(old) = &found.replaced {
        step.replace(group, old, &request.member_id);
    }
    let meta = updated_meta(&found.member.meta, request);
    let names_changed =
        found.is_new || meta.subscribed_topic_names != found.member.meta.subscribed_topic_names;
    if meta != found.member.meta || found.replaced.is_some() {
        step.records.push(Record::Member(meta.clone()));
    }
    let context = ResolveContext { topics, now_ms, describable };
    let subscriptions = Subscriptions::after(group, &found, &meta, &context, &mut step)?;
    let hash = subscriptions.metadata_hash(topics);
    let bump =
        group.epoch == 0 || names_changed || step.regex_resolved || hash != group.metadata_hash;
    let epoch = if bump { group.epoch + 1 } else { group.epoch };
    if bump {
        step.records.push(Record::GroupMetadata { epoch, metadata_hash: hash });
    }
    let member = Member { meta, ..found.member.clone() };
    let (target_epoch, target) = if epoch > group.assignment_epoch {
        let targets = assign(group, &found, &member, &subscriptions, topics, config);
        step.targets(group, &found, &targets, epoch);
        (epoch, targets.get(member.id()).cloned().unwrap_or_default())
    } else {
        let id = found.replaced.as_deref().unwrap_or(member.id());
        (group.assignment_epoch, group.target_of(id))
    };
    let replaced = found.replaced.as_deref();
    let member_id = member.id().to_string();
    let owned_by_other = |topic: &super::TopicId, partition: i32| {
        group
            .owners
            .get(&(*topic, partition))
            .is_some_and(|owner| owner != &member_id && Some(owner.as_str()) != replaced)
    };
    let target = Target { epoch: target_epoch, partitions: &target };
    let current = reconcile(&member, target, request.owned.as_ref(), &owned_by_other)?;
    if current != member.current() || found.is_new || found.replaced.is_some() {
        step.records.push(Record::Current(current.clone()));
    }
    let answer = answer_of(request, &member, &current, target_epoch, config);
    Ok(Step { records: step.records, answer })
}

/// A heartbeat's answer: the assignment when the member (re)joined, sent its full state or
/// its assignment changed. A member still on its way to its target (waiting for partitions
/// another member is releasing) is asked back sooner: it learns of them when it heartbeats,
/// and the broker cannot push (strata's choice; Kafka answers every member the same interval).
fn answer_of(
    request: &HeartbeatRequest,
    member: &Member,
    current: &CurrentAssignment,
    target_epoch: i32,
    config: &ConsumerConfig,
) -> HeartbeatAnswer {
    let full = request.rebalance_timeout_ms != -1
        && (request.subscribed_topic_names.is_some() || request.subscribed_topic_regex.is_some())
        && request.owned.is_some();
    let send = request.member_epoch == 0 || full || current.assigned != member.assigned;
    let reconciled = current.state == MemberState::Stable && current.member_epoch == target_epoch;
    let interval = if reconciled {
        config.heartbeat_interval_ms
    } else {
        config.heartbeat_interval_ms.min(RECONCILING_HEARTBEAT_INTERVAL_MS)
    };
    HeartbeatAnswer {
        member_id: member.id().to_string(),
        member_epoch: current.member_epoch,
        heartbeat_interval_ms: interval,
        assignment: send.then(|| current.assigned.clone()),
    }
}

/// The member a heartbeat is for.
struct Found {
    member: Member,
    /// The member is not in the group yet.
    is_new: bool,
    /// The id of the static member this one replaces.
    replaced: Option<String>,
}

fn find_member(
    group: &ConsumerGroup,
    request: &HeartbeatRequest,
    config: &ConsumerConfig,
) -> Result<Found, GroupError> {
    let epoch = request.member_epoch;
    let existing = group.members.get(&request.member_id);
    let holder = request.instance_id.as_deref().and_then(|i| group.static_member(i));
    if existing.is_none()
        && holder.is_none_or(|h| h.epoch != STATIC_LEAVE_EPOCH)
        && group.members.len() >= config.members_max
    {
        return Err(GroupError::GroupMaxSizeReached);
    }
    let known = |member: &Member| -> Result<Found, GroupError> {
        check_epoch(member, request)?;
        Ok(Found { member: member.clone(), is_new: false, replaced: None })
    };
    match (request.instance_id.as_deref(), holder) {
        (Some(_), Some(holder)) if holder.id() == request.member_id => known(holder),
        (Some(_), Some(holder)) if epoch == 0 => {
            if holder.epoch != STATIC_LEAVE_EPOCH && !holder.is_classic() {
                return Err(GroupError::UnreleasedInstanceId);
            }
            let mut member = holder.clone();
            member.meta.member_id = request.member_id.clone();
            (member.epoch, member.previous_epoch) = (0, 0);
            member.state = MemberState::Stable;
            member.pending_revocation.clear();
            Ok(Found { member, is_new: false, replaced: Some(holder.id().to_string()) })
        }
        (Some(_), Some(_)) => Err(GroupError::FencedInstanceId),
        (Some(_), None) if epoch != 0 => Err(GroupError::UnknownMemberId),
        (_, _) => match existing {
            Some(member) => known(member),
            None if epoch == 0 => {
                let meta = MemberMetadata {
                    member_id: request.member_id.clone(),
                    ..MemberMetadata::default()
                };
                Ok(Found { member: Member::new(meta), is_new: true, replaced: None })
            }
            None => Err(GroupError::UnknownMemberId),
        },
    }
}

/// Kafka's member epoch rule: a newer epoch than the member's is fenced; an older one is taken
/// only when it is the previous epoch and the member owns no more than it is assigned (our
/// answer with the new epoch was lost). Epoch 0 rejoins.
fn check_epoch(member: &Member, request: &HeartbeatRequest) -> Result<(), GroupError> {
    let received = request.member_epoch;
    if received == 0 || received == member.epoch {
        return Ok(());
    }
    if received > member.epoch {
        return Err(GroupError::FencedMemberEpoch);
    }
    let owned_within = request.owned.as_ref().is_some_and(|owned| {
        owned.iter().all(|(topic, partitions)| {
            let assigned = member.assigned.get(topic);
            partitions.iter().all(|p| assigned.is_some_and(|a| a.contains(p)))
        })
    });
    if received == member.previous_epoch && owned_within {
        Ok(())
    } else {
        Err(GroupError::FencedMemberEpoch)
    }
}

fn updated_meta(old: &MemberMetadata, request: &HeartbeatRequest) -> MemberMetadata {
    let names = request.subscribed_topic_names.as_ref().map(|names| {
        let set: BTreeSet<&String> = names.iter().collect();
        set.into_iter().cloned().collect::<Vec<String>>()
    });
    let regex = match &request.subscribed_topic_regex {
        Some(pattern) if pattern.is_empty() => None,
        Some(pattern) => Some(pattern.clone()),
        None => old.subscribed_topic_regex.clone(),
    };
    MemberMetadata {
        member_id: request.member_id.clone(),
        instance_id: request.instance_id.clone().or_else(|| old.instance_id.clone()),
        rack_id: request.rack_id.clone().or_else(|| old.rack_id.clone()),
        client_id: request.client_id.clone(),
        client_host: request.client_host.clone(),
        subscribed_topic_names: names.unwrap_or_else(|| old.subscribed_topic_names.clone()),
        subscribed_topic_regex: regex,
        rebalance_timeout_ms: if request.rebalance_timeout_ms != -1 {
            request.rebalance_timeout_ms
        } else {
            old.rebalance_timeout_ms
        },
        server_assignor: request.server_assignor.clone().or_else(|| old.server_assignor.clone()),
        classic: None,
    }
}

/// The records a step collects, and what it learned on the way.
#[derive(Default)]
struct Changes {
    records: Vec<Record>,
    /// A regex subscription changed, or a regex's topics did.
    regex_resolved: bool,
}

impl Changes {
    /// A static member's new incarnation takes the place of `old`.
    fn replace(&mut self, group: &ConsumerGroup, old: &str, new: &str) {
        self.records.push(Record::CurrentTombstone { member_id: old.to_string() });
        self.records.push(Record::TargetMemberTombstone { member_id: old.to_string() });
        self.records.push(Record::MemberTombstone { member_id: old.to_string() });
        self.records.push(Record::TargetMember {
            member_id: new.to_string(),
            partitions: group.target_of(old),
        });
    }

    /// Target records of every member whose target changed, then the target's epoch.
    fn targets(
        &mut self,
        group: &ConsumerGroup,
        found: &Found,
        targets: &BTreeMap<String, Partitions>,
        epoch: i32,
    ) {
        for (member_id, partitions) in targets {
            let before = match &found.replaced {
                Some(old) if member_id == found.member.id() => group.targets.get(old),
                _ => group.targets.get(member_id),
            };
            if before != Some(partitions) {
                self.records.push(Record::TargetMember {
                    member_id: member_id.clone(),
                    partitions: partitions.clone(),
                });
            }
        }
        self.records.push(Record::TargetMetadata { assignment_epoch: epoch });
    }
}

/// Every member's subscription once this heartbeat's member is updated: topic names with
/// their subscriber counts, and resolved regexes.
struct Subscriptions {
    names: BTreeMap<String, usize>,
    regexes: BTreeMap<String, ResolvedRegex>,
}

impl Subscriptions {
    fn after(
        group: &ConsumerGroup,
        found: &Found,
        meta: &MemberMetadata,
        context: &ResolveContext<'_>,
        step: &mut Changes,
    ) -> Result<Subscriptions, GroupError> {
        let mut names = group.subscribed_names.clone();
        if !found.is_new {
            for name in &found.member.meta.subscribed_topic_names {
                if let Some(count) = names.get_mut(name) {
                    *count = count.saturating_sub(1);
                }
            }
        }
        for name in &meta.subscribed_topic_names {
            *names.entry(name.clone()).or_insert(0) += 1;
        }
        names.retain(|_, count| *count > 0);
        let mut regexes = group.regexes.clone();
        update_regexes(group, found, meta, context, &mut regexes, step)?;
        Ok(Subscriptions { names, regexes })
    }

    /// The topic names of a member's subscription (names and its regex's topics).
    fn of_member(&self, meta: &MemberMetadata) -> BTreeSet<String> {
        let mut all: BTreeSet<String> = meta.subscribed_topic_names.iter().cloned().collect();
        if let Some(resolved) =
            meta.subscribed_topic_regex.as_ref().and_then(|r| self.regexes.get(r))
        {
            all.extend(resolved.topics.iter().cloned());
        }
        all
    }

    /// A hash of every subscribed topic that exists (name, id, partition count): when it
    /// changes, the group's epoch is bumped and a new target computed.
    fn metadata_hash(&self, topics: &dyn Topics) -> i64 {
        let mut all: BTreeSet<&String> = self.names.keys().collect();
        for resolved in self.regexes.values() {
            all.extend(resolved.topics.iter());
        }
        metadata_hash(all.into_iter().map(String::as_str), topics)
    }
}

/// FNV-1a over (name, id, partitions) of each existing topic, in name order (0: none).
pub fn metadata_hash<'a>(names: impl Iterator<Item = &'a str>, topics: &dyn Topics) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut any = false;
    let mut mix = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for name in names {
        if let Some((id, partitions)) = topics.by_name(name) {
            any = true;
            mix(name.as_bytes());
            mix(&id);
            mix(&partitions.to_be_bytes());
        }
    }
    if any {
        hash as i64
    } else {
        0
    }
}

/// The regex records of this heartbeat: the member's regex changed (the old one loses its
/// last subscriber, the new one is resolved if nobody resolved it yet), and regexes resolved
/// at an older metadata version are resolved again when topics may have changed.
/// What resolving a regex needs: the topics, the time, and what the principal may describe.
struct ResolveContext<'a> {
    topics: &'a dyn Topics,
    now_ms: i64,
    describable: Describable<'a>,
}

fn update_regexes(
    group: &ConsumerGroup,
    found: &Found,
    meta: &MemberMetadata,
    context: &ResolveContext<'_>,
    regexes: &mut BTreeMap<String, ResolvedRegex>,
    step: &mut Changes,
) -> Result<(), GroupError> {
    let (topics, now_ms) = (context.topics, context.now_ms);
    let old = found.member.meta.subscribed_topic_regex.as_ref().filter(|_| !found.is_new);
    let new = meta.subscribed_topic_regex.as_ref();
    let version = topics.version() as i64;
    if old != new {
        step.regex_resolved = true;
        if let Some(old) = old {
            let others = group.members.values().any(|m| {
                m.id() != found.member.id() && m.meta.subscribed_topic_regex.as_ref() == Some(old)
            });
            if !others {
                regexes.remove(old);
                step.records.push(Record::RegexTombstone { regex: old.clone() });
            }
        }
    }
    let stale = topics.version() != group.checked_version;
    let mut names = None;
    // A regex new to the group is resolved from the next heartbeat on (Kafka resolves it in
    // the background; clients and librdkafka's tests expect its topics in a later
    // assignment than the member's literal topics). Those members already use are resolved now.
    let unresolved = group
        .members
        .values()
        .filter_map(|m| m.meta.subscribed_topic_regex.as_ref())
        .filter(|p| !regexes.contains_key(*p) && Some(*p) == new);
    let wanted: BTreeSet<String> = regexes
        .iter()
        .filter(|(_, resolved)| stale && resolved.version != version)
        .map(|(pattern, _)| pattern.clone())
        .chain(unresolved.cloned())
        .collect();
    for pattern in wanted {
        regex::compile(&pattern)?;
        let all = names.get_or_insert_with(|| topics.names());
        let mut matched = regex::resolve(&pattern, all);
        matched.retain(|name| (context.describable)(name));
        let changed = regexes.get(&pattern).is_none_or(|r| r.topics != matched);
        if !changed {
            continue;
        }
        step.regex_resolved = true;
        step.records.push(Record::Regex {
            regex: pattern.clone(),
            topics: matched.clone(),
            version,
            timestamp_ms: now_ms,
        });
        regexes.insert(pattern, ResolvedRegex { topics: matched, version, timestamp_ms: now_ms });
    }
    Ok(())
}

/// The preferred assignor: the one most members asked for, else the broker's first.
fn preferred_assignor(members: &[&MemberMetadata], config: &ConsumerConfig) -> Assignor {
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for meta in members {
        if let Some(name) = meta.server_assignor.as_deref() {
            *votes.entry(name).or_insert(0) += 1;
        }
    }
    let best = votes.iter().max_by_key(|(name, count)| (**count, std::cmp::Reverse(**name)));
    best.and_then(|(name, _)| Assignor::from_name(name))
        .or_else(|| config.assignors.first().copied())
        .unwrap_or(Assignor::Uniform)
}

/// The assignor a group uses now (ConsumerGroupDescribe shows it).
pub fn preferred_assignor_of(group: &ConsumerGroup, config: &ConsumerConfig) -> Assignor {
    let metas: Vec<&MemberMetadata> = group.members.values().map(|m| &m.meta).collect();
    preferred_assignor(&metas, config)
}

/// The assignor's input from the group with this heartbeat's member updated.
fn assign(
    group: &ConsumerGroup,
    found: &Found,
    member: &Member,
    subscriptions: &Subscriptions,
    topics: &dyn Topics,
    config: &ConsumerConfig,
) -> BTreeMap<String, Partitions> {
    let mut metas: Vec<&MemberMetadata> = group
        .members
        .values()
        .filter(|m| m.id() != member.id() && Some(m.id()) != found.replaced.as_deref())
        .map(|m| &m.meta)
        .collect();
    metas.push(&member.meta);
    metas.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    let mut spec = GroupSpec::default();
    for meta in &metas {
        let mut ids = BTreeSet::new();
        for name in subscriptions.of_member(meta) {
            if let Some((id, count)) = topics.by_name(&name) {
                ids.insert(id);
                spec.partition_counts.insert(id, count);
            }
        }
        let current_id = match &found.replaced {
            Some(old) if meta.member_id == member.id() => old.as_str(),
            _ => meta.member_id.as_str(),
        };
        spec.members.push(MemberSpec {
            member_id: meta.member_id.clone(),
            instance_id: meta.instance_id.clone(),
            topics: ids,
            current: group.target_of(current_id),
        });
    }
    preferred_assignor(&metas, config).assign(&spec)
}

/// A member leaves: -1 removes it (fence), -2 (static) keeps its partitions for its session.
pub fn leave(
    group: &ConsumerGroup,
    request: &HeartbeatRequest,
    topics: &dyn Topics,
    config: &ConsumerConfig,
) -> Result<Step, GroupError> {
    let member = match request.instance_id.as_deref() {
        Some(instance) => {
            let holder = group.static_member(instance).ok_or(GroupError::UnknownMemberId)?;
            if holder.id() != request.member_id {
                return Err(GroupError::FencedInstanceId);
            }
            holder
        }
        None => group.members.get(&request.member_id).ok_or(GroupError::UnknownMemberId)?,
    };
    let answer = |epoch: i32| HeartbeatAnswer {
        member_id: member.id().to_string(),
        member_epoch: epoch,
        heartbeat_interval_ms: config.heartbeat_interval_ms,
        assignment: None,
    };
    if request.member_epoch == STATIC_LEAVE_EPOCH {
        let current = CurrentAssignment {
            member_epoch: STATIC_LEAVE_EPOCH,
            previous_member_epoch: member.epoch,
            pending_revocation: Partitions::new(),
            ..member.current()
        };
        let records = vec![Record::Current(current)];
        return Ok(Step { records, answer: answer(STATIC_LEAVE_EPOCH) });
    }
    Ok(Step { records: fence(group, member.id(), topics), answer: answer(LEAVE_EPOCH) })
}

/// The records that remove a member (it left, or its session or rebalance timeout passed):
/// its assignment, target and metadata (in that order), the regex it alone used, and a new
/// group epoch so the others get its partitions.
pub fn fence(group: &ConsumerGroup, member_id: &str, topics: &dyn Topics) -> Vec<Record> {
    let Some(member) = group.members.get(member_id) else { return Vec::new() };
    let mut records = vec![
        Record::CurrentTombstone { member_id: member_id.to_string() },
        Record::TargetMemberTombstone { member_id: member_id.to_string() },
        Record::MemberTombstone { member_id: member_id.to_string() },
    ];
    let mut regexes = group.regexes.clone();
    if let Some(pattern) = &member.meta.subscribed_topic_regex {
        let others = group.members.values().any(|m| {
            m.id() != member_id && m.meta.subscribed_topic_regex.as_ref() == Some(pattern)
        });
        if !others && regexes.remove(pattern).is_some() {
            records.push(Record::RegexTombstone { regex: pattern.clone() });
        }
    }
    let mut names = group.subscribed_names.clone();
    for name in &member.meta.subscribed_topic_names {
        if let Some(count) = names.get_mut(name) {
            *count = count.saturating_sub(1);
        }
    }
    names.retain(|_, count| *count > 0);
    let subscriptions = Subscriptions { names, regexes };
    records.push(Record::GroupMetadata {
        epoch: group.epoch + 1,
        metadata_hash: subscriptions.metadata_hash(topics),
    });
    records
}
