//! TxnOffsetCommit (key 28), v0-3: offsets a transactional producer commits for a consumer
//! group inside its transaction (read-process-write). Sent to the group's coordinator, which
//! holds them until the transaction's marker (`services::groups::txn_offsets`): visible to the
//! group on commit, dropped on abort. v3 carries the member's identity (KIP-447), checked like
//! an OffsetCommit's; generation -1 with no member id is accepted, as Kafka does.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::{valid_group_id, Committed, TxnCommit, OFFSET_METADATA_BYTES_MAX};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (0, 3);

/// Each requested partition with the error found here (`None`: committed in the call).
type Outcome = (TopicPartition, Option<BrokerError>);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let group = request.group_id.0.to_string();
    let (outcomes, entries) = validate(node, context, &request, &group);
    let result = if entries.is_empty() {
        Ok(())
    } else {
        commit_offsets(node, context, &request, &group, entries).await
    };
    let shared = result.err().map(|error| {
        tracing::debug!(%error, %group, "TxnOffsetCommit refused");
        error_code(&error)
    });
    answer(outcomes, shared)
}

/// Each partition's outcome as checked here, and the offsets to commit for those that passed.
fn validate<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: &TxnOffsetCommitRequest,
    group: &str,
) -> (Vec<Outcome>, Vec<(TopicPartition, Committed)>) {
    let now = node.clock.now_ms();
    let image = node.metadata();
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut entries = Vec::new();
    // As Kafka: WRITE on the transactional id, READ on the group, then READ on each topic.
    let transactional_id = request.transactional_id.0.as_str();
    let id_refused =
        !node.allowed(context, AclOperation::Write, Resource::TransactionalId(transactional_id));
    let group_refused =
        !id_refused && !node.allowed(context, AclOperation::Read, Resource::Group(group));
    for topic in &request.topics {
        let topic_refused = !id_refused
            && !group_refused
            && !node.allowed(context, AclOperation::Read, Resource::Topic(&topic.name.0));
        for partition in &topic.partitions {
            let key = TopicPartition::new(topic.name.0.to_string(), partition.partition_index);
            let metadata =
                partition.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
            let refused = if id_refused {
                Some(BrokerError::TransactionalIdAuthorizationFailed(transactional_id.to_string()))
            } else if group_refused {
                Some(BrokerError::GroupAuthorizationFailed(group.to_string()))
            } else if topic_refused {
                Some(BrokerError::TopicAuthorizationFailed(key.topic.clone()))
            } else if !valid_group_id(group) {
                Some(BrokerError::Group(GroupError::InvalidGroupId))
            } else if image.placement(&key).is_none() {
                Some(BrokerError::UnknownTopicOrPartition(key.to_string()))
            } else if metadata.len() > OFFSET_METADATA_BYTES_MAX {
                Some(BrokerError::OffsetMetadataTooLarge(metadata.len()))
            } else {
                None
            };
            if refused.is_none() {
                let leader_epoch =
                    if context.api_version >= 2 { partition.committed_leader_epoch } else { -1 };
                let committed = Committed {
                    offset: partition.committed_offset,
                    metadata,
                    commit_ms: now,
                    leader_epoch,
                };
                entries.push((key.clone(), committed));
            }
            outcomes.push((key, refused));
        }
    }
    (outcomes, entries)
}

/// Hands the checked offsets to the group's coordinator, held until the transaction ends.
async fn commit_offsets<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: &TxnOffsetCommitRequest,
    group: &str,
    entries: Vec<(TopicPartition, Committed)>,
) -> Result<(), BrokerError> {
    let commit = TxnCommit {
        group: group.to_string(),
        transactional_id: request.transactional_id.0.to_string(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        member_id: if context.api_version >= 3 {
            request.member_id.to_string()
        } else {
            String::new()
        },
        instance_id: if context.api_version >= 3 {
            request.group_instance_id.as_ref().map(|id| id.to_string())
        } else {
            None
        },
        generation: if context.api_version >= 3 { request.generation_id } else { -1 },
        entries,
    };
    match node.groups.call(group, commit).await {
        Ok(result) => result,
        Err(error) => Err(error),
    }
}

/// Each partition's code (its own error, else the commit's), by topic in first-seen order.
fn answer(outcomes: Vec<Outcome>, shared: Option<i16>) -> TxnOffsetCommitResponse {
    let mut response = TxnOffsetCommitResponse::default();
    for (key, refused) in outcomes {
        let mut entry = TxnOffsetCommitResponsePartition::default();
        entry.partition_index = key.partition.0;
        entry.error_code = match (&refused, shared) {
            (Some(error), _) => error_code(error),
            (None, Some(code)) => code,
            (None, None) => NONE,
        };
        match response.topics.iter_mut().find(|t| t.name.0.as_str() == key.topic) {
            Some(topic) => topic.partitions.push(entry),
            None => {
                let mut topic = TxnOffsetCommitResponseTopic::default();
                topic.name = kafka_protocol::messages::TopicName(super::str_bytes(&key.topic));
                topic.partitions.push(entry);
                response.topics.push(topic);
            }
        }
    }
    response
}
