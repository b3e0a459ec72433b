//! OffsetFetch (key 9): committed offsets of a group (v8+: of several groups, KIP-709). An
//! unknown group, or a partition without a commit, answers offset -1 with no error, as Kafka.
//! v5+ answers the committed leader epoch (KIP-320; -1 when the commit carried none). v9
//! (KIP-848) may name a consumer group member and its epoch: UNKNOWN_MEMBER_ID or
//! STALE_MEMBER_EPOCH as the group's error when they are not the group's.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::requests::{FetchOffsets, FetchedOffsets};
use crate::services::groups::Committed;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (1, 9);

/// (topic, partition, offset, leader epoch, metadata, error code) for one group; `wanted` None
/// means all committed. With `require_stable` (v7+, KIP-447), a partition whose offset was
/// committed in a transaction still open is UNSTABLE_OFFSET_COMMIT (the client retries).
/// With the authorizer on, as Kafka: the group needs DESCRIBE (else the group's error, `Err`),
/// a named topic DESCRIBE (else TOPIC_AUTHORIZATION_FAILED on its partitions), and "all
/// committed" leaves out the topics the principal may not describe.
async fn fetch<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    group: &str,
    wanted: Option<Vec<TopicPartition>>,
    require_stable: bool,
    member: Option<(String, i32)>,
) -> Result<Vec<(String, i32, i64, i32, String, i16)>, i16> {
    if !node.allowed(context, AclOperation::Describe, Resource::Group(group)) {
        return Err(error_code(&BrokerError::GroupAuthorizationFailed(group.to_string())));
    }
    let describable =
        |topic: &str| node.allowed(context, AclOperation::Describe, Resource::Topic(topic));
    let refused_code = error_code(&BrokerError::TopicAuthorizationFailed(String::new()));
    let (wanted, refused): (Option<Vec<TopicPartition>>, Vec<TopicPartition>) = match wanted {
        Some(wanted) => {
            let (allowed, refused) = wanted.into_iter().partition(|key| describable(&key.topic));
            (Some(allowed), refused)
        }
        None => (None, Vec::new()),
    };
    let refused_rows = refused
        .into_iter()
        .map(|key| (key.topic, key.partition.0, -1, -1, String::new(), refused_code));
    let request = FetchOffsets { group: group.to_string(), wanted: wanted.clone(), member };
    let (found, unstable) = match node.groups.call(group, request).await {
        Ok(Ok(FetchedOffsets { committed, unstable })) => (committed, unstable),
        Ok(Err(error)) => return Err(error_code(&BrokerError::Group(error))),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let unstable_code = error_code(&BrokerError::UnstableOffsetCommit(group.to_string()));
    let row = |key: TopicPartition, committed: Option<&Committed>| {
        let code = if require_stable && unstable.contains(&key) { unstable_code } else { NONE };
        match committed {
            Some(c) => {
                (key.topic, key.partition.0, c.offset, c.leader_epoch, c.metadata.clone(), code)
            }
            None => (key.topic, key.partition.0, -1, -1, String::new(), code),
        }
    };
    let rows: Vec<_> = match wanted {
        None => found
            .into_iter()
            .filter(|(key, _)| describable(&key.topic))
            .map(|(key, c)| row(key, Some(&c)))
            .collect(),
        Some(wanted) => wanted
            .into_iter()
            .map(|key| {
                let committed = found.iter().find(|(k, _)| *k == key).map(|(_, c)| c);
                row(key, committed)
            })
            .collect(),
    };
    Ok(rows.into_iter().chain(refused_rows).collect())
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let version = context.api_version;
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        for requested in &request.groups {
            let group_response =
                fetch_group(node, context, requested, request.require_stable).await;
            response.groups.push(group_response);
        }
        return response;
    }
    let group = request.group_id.0.to_string();
    let wanted = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |p| TopicPartition::new(t.name.0.to_string(), *p))
            })
            .collect()
    });
    let require_stable = version >= 7 && request.require_stable;
    let rows = match fetch(node, context, &group, wanted, require_stable, None).await {
        Ok(rows) => rows,
        Err(code) => {
            response.error_code = code;
            return response;
        }
    };
    answer_topics(&mut response, rows, version);
    if version >= 2 {
        response.error_code = NONE;
    }
    response
}

/// One group's answer (v8+): its committed offsets by topic, or the group's error.
async fn fetch_group<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    requested: &OffsetFetchRequestGroup,
    require_stable: bool,
) -> OffsetFetchResponseGroup {
    let group = requested.group_id.0.to_string();
    let wanted = requested.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |p| TopicPartition::new(t.name.0.to_string(), *p))
            })
            .collect()
    });
    let mut group_response = OffsetFetchResponseGroup::default();
    group_response.group_id = requested.group_id.clone();
    group_response.error_code = NONE;
    let member = match (&requested.member_id, context.api_version >= 9) {
        (Some(member_id), true) => Some((member_id.to_string(), requested.member_epoch)),
        (None, true) if requested.member_epoch >= 0 => {
            Some((String::new(), requested.member_epoch))
        }
        _ => None,
    };
    let rows = match fetch(node, context, &group, wanted, require_stable, member).await {
        Ok(rows) => rows,
        Err(code) => {
            group_response.error_code = code;
            Vec::new()
        }
    };
    for (topic, partition, offset, epoch, metadata, code) in rows {
        let mut entry = OffsetFetchResponsePartitions::default();
        entry.error_code = code;
        entry.partition_index = partition;
        entry.committed_offset = offset;
        entry.committed_leader_epoch = epoch;
        entry.metadata = Some(super::str_bytes(&metadata));
        match group_response.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(entry),
            None => {
                let mut t = OffsetFetchResponseTopics::default();
                t.name = TopicName(super::str_bytes(&topic));
                t.partitions.push(entry);
                group_response.topics.push(t);
            }
        }
    }
    group_response
}

/// The single group's committed offsets (v1-7), by topic in first-seen order.
fn answer_topics(
    response: &mut OffsetFetchResponse,
    rows: Vec<(String, i32, i64, i32, String, i16)>,
    version: i16,
) {
    for (topic, partition, offset, epoch, metadata, code) in rows {
        let mut entry = OffsetFetchResponsePartition::default();
        entry.error_code = code;
        entry.partition_index = partition;
        entry.committed_offset = offset;
        if version >= 5 {
            entry.committed_leader_epoch = epoch;
        }
        entry.metadata = Some(super::str_bytes(&metadata));
        match response.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(entry),
            None => {
                let mut t = OffsetFetchResponseTopic::default();
                t.name = TopicName(super::str_bytes(&topic));
                t.partitions.push(entry);
                response.topics.push(t);
            }
        }
    }
}
