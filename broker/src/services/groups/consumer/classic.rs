//! Classic and consumer groups side by side (KIP-848 "online upgrade"): a classic group whose
//! members restart with `group.protocol=consumer` becomes a consumer group without losing its
//! members or their partitions, the members still on the classic protocol stay in it (their
//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup are answered from the consumer group), and
//! when the last consumer-protocol member leaves, the group goes back to classic.
//!
//! A classic member is a consumer group member with `ClassicMemberMetadata` (its session
//! timeout and protocols): its JoinGroup is turned into a heartbeat (subscription and owned
//! partitions from its ConsumerProtocolSubscription), its generation is its member epoch, its
//! SyncGroup is answered its assigned partitions as a ConsumerProtocolAssignment, and its
//! Heartbeat answers REBALANCE_IN_PROGRESS while it is not at its target, so it joins again
//! with what it owns. Pure: the coordinator appends the records and answers.
//! References: KIP-848 "Upgrade and downgrade"; Kafka `GroupMetadataManager`
//! (`classicGroupJoinToConsumerGroup`, `classicGroupSyncToConsumerGroup`,
//! `classicGroupHeartbeatToConsumerGroup`), `ConsumerGroup.fromClassicGroup`,
//! `ClassicGroup.fromConsumerGroup`.

use super::heartbeat::{heartbeat, metadata_hash, HeartbeatRequest};
use super::records::{ClassicMemberMetadata, CurrentAssignment, MemberMetadata, MemberState};
use super::{ConsumerConfig, ConsumerGroup, Partitions, Record, TopicId, Topics};
use crate::error::GroupError;
use crate::services::groups::state_machine::{Group, JoinRequest, CONSUMER_PROTOCOL_TYPE};
use crate::services::groups::stored::{StoredGroup, StoredMember};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{consumer_protocol_assignment, ConsumerProtocolAssignment};
use kafka_protocol::messages::{ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The highest ConsumerProtocolSubscription/Assignment version.
const CONSUMER_PROTOCOL_VERSION_MAX: i16 = 3;

/// A classic member's subscription (its metadata for the group's protocol).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub version: i16,
    pub topics: Vec<String>,
    pub owned: Vec<(String, i32)>,
    pub rack: Option<String>,
}

/// Reads a ConsumerProtocolSubscription (a version, then the body in that version, newer
/// versions read as the newest strata knows).
pub fn parse_subscription(metadata: &[u8]) -> Option<Subscription> {
    let mut buf = Bytes::copy_from_slice(metadata);
    if buf.len() < 2 {
        return None;
    }
    let version = buf.get_i16().clamp(0, CONSUMER_PROTOCOL_VERSION_MAX);
    let subscription = ConsumerProtocolSubscription::decode(&mut buf, version).ok()?;
    Some(Subscription {
        version,
        topics: subscription.topics.iter().map(|t| t.to_string()).collect(),
        owned: subscription
            .owned_partitions
            .iter()
            .flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic.0.to_string(), *p)))
            .collect(),
        rack: subscription.rack_id.map(|r| r.to_string()),
    })
}

/// A ConsumerProtocolAssignment of `partitions` in `version` (topic names from the image).
pub fn encode_assignment(
    partitions: &Partitions,
    topics: &dyn TopicNames,
    version: i16,
) -> Result<Bytes, GroupError> {
    let version = version.clamp(0, CONSUMER_PROTOCOL_VERSION_MAX);
    let mut assignment = ConsumerProtocolAssignment::default();
    for (topic_id, parts) in partitions {
        let Some(name) = topics.name_of(topic_id) else { continue };
        let mut topic = consumer_protocol_assignment::TopicPartition::default();
        topic.topic = TopicName(StrBytes::from_string(name));
        topic.partitions = parts.iter().copied().collect();
        assignment.assigned_partitions.push(topic);
    }
    let mut out = BytesMut::new();
    out.put_i16(version);
    assignment
        .encode(&mut out, version)
        .map_err(|error| GroupError::AssignorFailed(format!("encoding an assignment: {error}")))?;
    Ok(out.freeze())
}

/// Topic names by id (the metadata image; a map in tests).
pub trait TopicNames {
    fn name_of(&self, topic_id: &TopicId) -> Option<String>;
}

impl TopicNames for crate::metadata::image::MetadataImage {
    fn name_of(&self, topic_id: &TopicId) -> Option<String> {
        self.topic_by_id(topic_id).map(|t| t.name.clone())
    }
}

fn owned_by_id(owned: &[(String, i32)], topics: &dyn Topics) -> Partitions {
    let mut partitions = Partitions::new();
    for (name, partition) in owned {
        if let Some((id, _)) = topics.by_name(name) {
            partitions.entry(id).or_default().insert(*partition);
        }
    }
    partitions
}

/// The records that turn a Stable (or any) classic group with members into a consumer group
/// at the classic generation, every member keeping its assignment (`ConsumerGroup
/// .fromClassicGroup`). `None` when a member's metadata is not a consumer subscription.
pub fn from_classic(classic: &Group, topics: &dyn Topics) -> Option<Vec<Record>> {
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE {
        return None;
    }
    let epoch = classic.generation.max(1);
    let mut records = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    let mut members = Vec::new();
    for member in classic.members.values() {
        let metadata = member.metadata_for(&classic.protocol);
        let subscription = parse_subscription(&metadata)?;
        let assigned =
            crate::services::groups::consumer::classic::assignment_of(&member.assignment, topics)?;
        names.extend(subscription.topics.iter().cloned());
        let meta = MemberMetadata {
            member_id: member.id.clone(),
            instance_id: member.instance_id.clone(),
            rack_id: subscription.rack.clone(),
            client_id: member.client_id.clone(),
            client_host: member.client_host.clone(),
            subscribed_topic_names: subscription.topics.clone(),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: member.rebalance_timeout_ms,
            server_assignor: None,
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: member.session_timeout_ms,
                protocols: member.protocols.iter().map(|(n, m)| (n.clone(), m.to_vec())).collect(),
            }),
        };
        members.push((meta, assigned));
    }
    let hash = metadata_hash(names.iter().map(String::as_str), topics);
    records.push(Record::GroupMetadata { epoch, metadata_hash: hash });
    for (meta, assigned) in &members {
        records.push(Record::Member(meta.clone()));
        let member_id = meta.member_id.clone();
        records.push(Record::TargetMember { member_id, partitions: assigned.clone() });
    }
    records.push(Record::TargetMetadata { assignment_epoch: epoch });
    for (meta, assigned) in members {
        records.push(Record::Current(CurrentAssignment {
            member_id: meta.member_id,
            member_epoch: epoch,
            previous_member_epoch: epoch,
            state: MemberState::Stable,
            assigned,
            pending_revocation: Partitions::new(),
        }));
    }
    Some(records)
}

/// A classic member's assignment bytes as partitions by topic id (`None`: unreadable).
pub fn assignment_of(bytes: &[u8], topics: &dyn Topics) -> Option<Partitions> {
    if bytes.is_empty() {
        return Some(Partitions::new());
    }
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.len() < 2 {
        return None;
    }
    let version = buf.get_i16().clamp(0, CONSUMER_PROTOCOL_VERSION_MAX);
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version).ok()?;
    let owned: Vec<(String, i32)> = assignment
        .assigned_partitions
        .iter()
        .flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic.0.to_string(), *p)))
        .collect();
    Some(owned_by_id(&owned, topics))
}

/// What a classic member's JoinGroup gets from a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicJoined {
    pub member_id: String,
    /// Its member epoch, as the generation.
    pub generation: i32,
    /// The protocol it is answered (its first).
    pub protocol: String,
}

/// A classic member's JoinGroup on a consumer group with members: the records to append and
/// its answer. Its subscription and owned partitions come from its metadata for its first
/// protocol; the join is a heartbeat with the member's current epoch (0 when new).
pub fn classic_join(
    group: &ConsumerGroup,
    join: &JoinRequest,
    topics: &dyn Topics,
    config: &ConsumerConfig,
    now_ms: i64,
) -> Result<(Vec<Record>, ClassicJoined), GroupError> {
    if join.protocol_type != CONSUMER_PROTOCOL_TYPE {
        return Err(GroupError::InconsistentGroupProtocol);
    }
    let (protocol, metadata) =
        join.protocols.first().ok_or(GroupError::InconsistentGroupProtocol)?;
    let subscription = parse_subscription(metadata).ok_or(GroupError::InconsistentGroupProtocol)?;
    let known = group
        .members
        .get(&join.member_id)
        .or_else(|| join.instance_id.as_deref().and_then(|instance| group.static_member(instance)));
    let member_id = known.map_or(join.member_id.clone(), |m| m.id().to_string());
    let request = HeartbeatRequest {
        group_id: join.group.clone(),
        member_id: member_id.clone(),
        member_epoch: known.map_or(0, |m| m.epoch.max(0)),
        instance_id: join.instance_id.clone(),
        rack_id: subscription.rack.clone(),
        rebalance_timeout_ms: join.rebalance_timeout_ms,
        subscribed_topic_names: Some(subscription.topics.clone()),
        subscribed_topic_regex: Some(String::new()),
        server_assignor: None,
        owned: Some(if known.is_some() {
            owned_by_id(&subscription.owned, topics)
        } else {
            Partitions::new()
        }),
        client_id: join.client_id.clone(),
        client_host: join.client_host.clone(),
        principal: String::new(),
        host: String::new(),
    };
    // A classic member has no regex to resolve.
    let mut step = heartbeat(Some(group), &request, topics, config, now_ms, &|_| true)?;
    let classic = ClassicMemberMetadata {
        session_timeout_ms: join.session_timeout_ms,
        protocols: join.protocols.iter().map(|(n, m)| (n.clone(), m.to_vec())).collect(),
    };
    let mut marked = false;
    for record in &mut step.records {
        if let Record::Member(meta) = record {
            if meta.member_id == member_id {
                meta.classic = Some(classic.clone());
                marked = true;
            }
        }
    }
    let stored = group.members.get(&member_id).and_then(|m| m.meta.classic.as_ref());
    if !marked && stored != Some(&classic) {
        let base = group.members.get(&member_id).map(|m| m.meta.clone()).unwrap_or_default();
        step.records.push(Record::Member(MemberMetadata { classic: Some(classic), ..base }));
    }
    let joined = ClassicJoined {
        member_id,
        generation: step.answer.member_epoch,
        protocol: protocol.clone(),
    };
    Ok((step.records, joined))
}

/// A classic member of a consumer group (`UNKNOWN_MEMBER_ID` otherwise) at `generation`.
fn classic_member<'a>(
    group: &'a ConsumerGroup,
    member_id: &str,
    generation: i32,
) -> Result<&'a super::Member, GroupError> {
    let member = group.members.get(member_id).filter(|m| m.is_classic());
    let member = member.ok_or(GroupError::UnknownMemberId)?;
    if member.epoch != generation {
        return Err(GroupError::IllegalGeneration);
    }
    Ok(member)
}

/// A classic member's SyncGroup: its assigned partitions (what it must give up is left out,
/// so a cooperative client revokes it), or REBALANCE_IN_PROGRESS while a newer epoch waits.
pub fn classic_sync(
    group: &ConsumerGroup,
    member_id: &str,
    generation: i32,
    topics: &dyn TopicNames,
) -> Result<(Bytes, String), GroupError> {
    let member = classic_member(group, member_id, generation)?;
    if group.epoch > member.epoch && member.state != MemberState::UnrevokedPartitions {
        return Err(GroupError::RebalanceInProgress);
    }
    let classic = member.meta.classic.as_ref().ok_or(GroupError::UnknownMemberId)?;
    let (protocol, metadata) = classic.protocols.first().ok_or(GroupError::UnknownMemberId)?;
    let version = parse_subscription(metadata).map_or(0, |s| s.version);
    Ok((encode_assignment(&member.assigned, topics, version)?, protocol.clone()))
}

/// A classic member's Heartbeat: REBALANCE_IN_PROGRESS while it is not at its target (a
/// newer epoch, partitions to revoke, or partitions it waits for that are now free), so it
/// joins again.
pub fn classic_heartbeat(
    group: &ConsumerGroup,
    member_id: &str,
    generation: i32,
) -> Result<(), GroupError> {
    let member = classic_member(group, member_id, generation)?;
    let target = group.target_of(member_id);
    let waiting_free = member.state == MemberState::UnreleasedPartitions
        && target.iter().any(|(topic, parts)| {
            parts.iter().any(|p| {
                !member.assigned.get(topic).is_some_and(|a| a.contains(p))
                    && !group.owned_by_other(topic, *p, member_id)
            })
        });
    if member.epoch < group.assignment_epoch
        || group.epoch > group.assignment_epoch
        || member.state == MemberState::UnrevokedPartitions
        || waiting_free
    {
        return Err(GroupError::RebalanceInProgress);
    }
    Ok(())
}

/// The classic group a consumer group with only classic members becomes (downgrade): its
/// generation is the group epoch, each member keeps its assignment; `None` if a member is not
/// classic or has no protocol. The first member leads.
pub fn to_classic(group: &ConsumerGroup, topics: &dyn TopicNames) -> Option<StoredGroup> {
    let mut members = Vec::new();
    let mut protocol = None;
    for member in group.members.values() {
        let classic = member.meta.classic.as_ref()?;
        let (name, metadata) = classic.protocols.first()?;
        protocol.get_or_insert_with(|| name.clone());
        let version = parse_subscription(metadata).map_or(0, |s| s.version);
        let assignment = encode_assignment(&member.assigned, topics, version).ok()?;
        let chosen = classic
            .protocols
            .iter()
            .find(|(n, _)| Some(n) == protocol.as_ref())
            .map(|(_, m)| Bytes::from(m.clone()))?;
        members.push(StoredMember {
            id: member.id().to_string(),
            instance_id: member.meta.instance_id.clone(),
            client_id: member.meta.client_id.clone(),
            client_host: member.meta.client_host.clone(),
            session_timeout_ms: classic.session_timeout_ms,
            rebalance_timeout_ms: member.meta.rebalance_timeout_ms,
            metadata: chosen,
            assignment,
        });
    }
    let leader = members.first()?.id.clone();
    Some(StoredGroup {
        generation: group.epoch,
        protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
        protocol: protocol?,
        leader,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::groups::consumer::TopicMap;
    use kafka_protocol::messages::consumer_protocol_subscription;

    fn subscription(topics: &[&str], owned: &[(&str, i32)]) -> Bytes {
        let mut s = ConsumerProtocolSubscription::default();
        s.topics = topics.iter().map(|t| StrBytes::from_string(t.to_string())).collect();
        for (topic, partition) in owned {
            let mut tp = consumer_protocol_subscription::TopicPartition::default();
            tp.topic = TopicName(StrBytes::from_string(topic.to_string()));
            tp.partitions = vec![*partition];
            s.owned_partitions.push(tp);
        }
        let mut out = BytesMut::new();
        out.put_i16(1);
        s.encode(&mut out, 1).expect("encode");
        out.freeze()
    }

    struct Names(TopicMap);
    impl TopicNames for Names {
        fn name_of(&self, topic_id: &TopicId) -> Option<String> {
            self.0.topics.iter().find(|(_, (id, _))| id == topic_id).map(|(n, _)| n.clone())
        }
    }

    #[test]
    fn subscriptions_and_assignments_round_trip() {
        let parsed = parse_subscription(&subscription(&["a", "b"], &[("a", 1)])).expect("parse");
        assert_eq!(parsed.topics, vec!["a", "b"]);
        assert_eq!(parsed.owned, vec![("a".to_string(), 1)]);
        let mut topics = TopicMap::default();
        topics.topics.insert("a".into(), ([1; 16], 4));
        let mut partitions = Partitions::new();
        partitions.entry([1; 16]).or_default().extend([0, 2]);
        let names = Names(topics.clone());
        let bytes = encode_assignment(&partitions, &names, 1).expect("encode");
        assert_eq!(assignment_of(&bytes, &topics), Some(partitions));
        assert_eq!(parse_subscription(&[0]), None);
    }
}
