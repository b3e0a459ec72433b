//! OffsetCommit (key 8): stores committed offsets durably in `__consumer_offsets` on the shard
//! coordinating the group (see `services::groups`). Commits from members are checked against
//! the group (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS); standalone commits
//! (generation -1, no member id) are accepted while the group has no members, as in Kafka.
//! v9 (KIP-848) carries a consumer group member's epoch: STALE_MEMBER_EPOCH when it is not the
//! member's, UNSUPPORTED_VERSION for such a member committing below v9.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, Result, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::OFFSET_METADATA_BYTES_MAX;
use crate::services::groups::{requests::Commit, valid_group_id, Committed};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (2, 9);

/// The error a partition's commit gets before it reaches the coordinator, if any.
fn check_partition<S: Storage>(
    node: &Node<S>,
    group_valid: bool,
    partition: &TopicPartition,
    metadata: &str,
) -> Option<BrokerError> {
    if !group_valid {
        return Some(BrokerError::Group(GroupError::InvalidGroupId));
    }
    if node.metadata().placement(partition).is_none() {
        return Some(BrokerError::UnknownTopicOrPartition(partition.to_string()));
    }
    if metadata.len() > OFFSET_METADATA_BYTES_MAX {
        return Some(BrokerError::OffsetMetadataTooLarge(metadata.len()));
    }
    None
}

async fn commit<S: Storage>(node: &Node<S>, group: &str, request: Commit) -> Result<()> {
    node.groups.call(group, request).await?
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let group = request.group_id.0.to_string();
    let group_valid = valid_group_id(&group);
    let now = node.clock.now_ms();
    // Per-partition validation first; the valid ones are committed in one durable append.
    let mut outcomes: Vec<(TopicPartition, Option<BrokerError>)> = Vec::new();
    let mut entries = Vec::new();
    // As Kafka: READ on the group for every partition, then READ on each topic.
    let group_refused = !node.allowed(context, AclOperation::Read, Resource::Group(&group));
    for topic in &request.topics {
        let topic_refused = !group_refused
            && !node.allowed(context, AclOperation::Read, Resource::Topic(&topic.name.0));
        for partition in &topic.partitions {
            let key = TopicPartition::new(topic.name.0.to_string(), partition.partition_index);
            let metadata =
                partition.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
            let error = if group_refused {
                Some(BrokerError::GroupAuthorizationFailed(group.clone()))
            } else if topic_refused {
                Some(BrokerError::TopicAuthorizationFailed(key.topic.clone()))
            } else {
                check_partition(node, group_valid, &key, &metadata)
            };
            if error.is_none() {
                let committed = Committed {
                    offset: partition.committed_offset,
                    metadata,
                    commit_ms: now,
                    // v6+ (KIP-320); older versions have no field, so the default -1.
                    leader_epoch: partition.committed_leader_epoch,
                };
                entries.push((key.clone(), committed));
            }
            outcomes.push((key, error));
        }
    }
    let commit_code = if entries.is_empty() {
        NONE
    } else {
        let call = Commit {
            group: group.clone(),
            member_id: request.member_id.to_string(),
            instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
            generation: request.generation_id_or_member_epoch,
            entries,
            api_version: context.api_version,
        };
        match commit(node, &group, call).await {
            Ok(()) => NONE,
            Err(error) => error_code(&error),
        }
    };
    let mut response = OffsetCommitResponse::default();
    for (key, error) in outcomes {
        let mut entry = OffsetCommitResponsePartition::default();
        entry.partition_index = key.partition.0;
        entry.error_code = match error {
            Some(error) => error_code(&error),
            None => commit_code,
        };
        node.stats.count_error(entry.error_code);
        match response.topics.iter_mut().find(|t| t.name.0.as_str() == key.topic) {
            Some(topic) => topic.partitions.push(entry),
            None => {
                let mut topic = OffsetCommitResponseTopic::default();
                topic.name = kafka_protocol::messages::TopicName(super::str_bytes(&key.topic));
                topic.partitions.push(entry);
                response.topics.push(topic);
            }
        }
    }
    response
}
