//! ShareAcknowledge (key 79, KIP-932): a share consumer's acknowledgements sent alone (commitSync
//! and commitAsync, or acknowledgements of partitions it no longer fetches), in its share
//! session: epoch 0 is refused (INVALID_SHARE_SESSION_EPOCH: a session is opened by
//! ShareFetch), a later epoch must be the session's next, -1 closes the session after the
//! acknowledgements and releases what the member still holds. Each partition's
//! acknowledgements are applied all or none; its ErrorCode says why not.
//! Authorization as ShareFetch: READ on the group and on each topic.
//! References: KIP-932; Kafka `KafkaApis.handleShareAcknowledgeRequest`.

use super::share_fetch::{ack_ranges, acknowledge_each, coded, release, topic_of};
use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, ShareError};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::share_sessions::{SessionKey, FINAL_EPOCH, INITIAL_EPOCH};
use crate::services::shares::AckRange;
use kafka_protocol::messages::share_acknowledge_request::AcknowledgeTopic;
use kafka_protocol::messages::share_acknowledge_response::{
    NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{BrokerId, ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;
use std::collections::{BTreeMap, HashMap};
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (1, 1);

fn failed(error: &BrokerError) -> ShareAcknowledgeResponse {
    let mut response = ShareAcknowledgeResponse::default();
    response.error_code = error_code(error);
    response.error_message = Some(StrBytes::from_string(error.to_string()));
    response
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    let group = request.group_id.as_ref().map(|g| g.0.to_string()).unwrap_or_default();
    let member = request.member_id.as_ref().map(|m| m.to_string()).unwrap_or_default();
    if group.is_empty() || member.is_empty() {
        return failed(&BrokerError::InvalidRequest("GroupId and MemberId are required".into()));
    }
    if !node.allowed(context, AclOperation::Read, Resource::Group(&group)) {
        return failed(&BrokerError::GroupAuthorizationFailed(group));
    }
    let key: SessionKey = (group, member);
    let epoch = request.share_session_epoch;
    let closing = match epoch {
        INITIAL_EPOCH => {
            return failed(&BrokerError::Share(ShareError::InvalidSessionEpoch {
                got: epoch,
                expected: 1,
            }))
        }
        FINAL_EPOCH => match node.share_sessions.borrow_mut().close(&key) {
            Ok(session) => Some(session),
            Err(error) => return failed(&error),
        },
        _ => match node.share_sessions.borrow_mut().advance(&key, epoch, Vec::new(), &[]) {
            Ok(_) => None,
            Err(error) => return failed(&error),
        },
    };
    // Every partition checked first; then all their acknowledgements at once, so their state
    // writes share the share coordinators' syncs.
    let (checked, acks) = check_partitions(node, context, request.topics);
    let refused: HashMap<TopicPartition, (i16, String)> = acknowledge_each(node, &key, acks)
        .await
        .into_iter()
        .filter_map(|(partition, error)| error.map(|error| (partition, error)))
        .collect();
    let response = respond(node, checked, &refused);
    if let Some(session) = closing {
        release(node, &key, session.partitions.into_keys()).await;
    }
    response
}

/// A request partition as checked: its index, its name (None: the topic is unknown), and its
/// error if it was refused before its acknowledgements were applied.
type Checked = (i32, Option<TopicPartition>, Result<(), (i16, String)>);
/// Each request topic's id and its partitions as checked.
type CheckedTopics = Vec<(uuid::Uuid, Vec<Checked>)>;

/// Each topic's partitions checked (the topic known and readable, the acknowledgement batches
/// well formed), and the acknowledgements of those that passed.
fn check_partitions<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    topics: Vec<AcknowledgeTopic>,
) -> (CheckedTopics, BTreeMap<TopicPartition, Vec<AckRange>>) {
    let mut checked = Vec::new();
    let mut acks = BTreeMap::new();
    for topic in topics {
        let name = topic_of(node, context, &topic.topic_id);
        let mut partitions = Vec::new();
        for partition in topic.partitions {
            let batches = partition.acknowledgement_batches.iter().map(|batch| {
                (batch.first_offset, batch.last_offset, batch.acknowledge_types.clone())
            });
            let tp = name
                .as_ref()
                .ok()
                .map(|n| TopicPartition::new(n.clone(), partition.partition_index));
            let outcome = match (&tp, &name, ack_ranges(batches)) {
                (_, Err(error), _) => Err(coded(error)),
                (_, _, Err(error)) => Err(coded(&error)),
                (None, _, _) => Ok(()),
                (Some(tp), Ok(_), Ok(ranges)) => {
                    acks.insert(tp.clone(), ranges);
                    Ok(())
                }
            };
            partitions.push((partition.partition_index, tp, outcome));
        }
        checked.push((topic.topic_id, partitions));
    }
    (checked, acks)
}

/// The response: each checked partition's error, or its acknowledgements' (`refused`), with
/// the leader's hint where the error names one.
fn respond<S: Storage>(
    node: &Node<S>,
    checked: CheckedTopics,
    refused: &HashMap<TopicPartition, (i16, String)>,
) -> ShareAcknowledgeResponse {
    let mut response = ShareAcknowledgeResponse::default();
    for (topic_id, partitions) in checked {
        let mut answered = ShareAcknowledgeTopicResponse::default();
        answered.topic_id = topic_id;
        for (partition_index, tp, outcome) in partitions {
            let outcome = outcome.and_then(|()| match tp.as_ref().and_then(|tp| refused.get(tp)) {
                Some(error) => Err(error.clone()),
                None => Ok(()),
            });
            let mut data = PartitionData::default();
            data.partition_index = partition_index;
            if let Err((code, message)) = outcome {
                data.error_code = code;
                data.error_message = Some(StrBytes::from_string(message));
                if let Some(tp) = &tp {
                    if let Some((leader, epoch, _)) = node.leader_hint(tp, data.error_code) {
                        data.current_leader.leader_id = leader.0;
                        data.current_leader.leader_epoch = epoch;
                        hint(node, tp, code, &mut response.node_endpoints);
                    }
                }
            }
            answered.partitions.push(data);
        }
        response.responses.push(answered);
    }
    response
}

/// Lists the endpoint of the partition's leader once, for an error that names a new leader.
fn hint<S: Storage>(
    node: &Node<S>,
    partition: &TopicPartition,
    code: i16,
    endpoints: &mut Vec<NodeEndpoint>,
) {
    let Some((leader, _, Some(endpoint))) = node.leader_hint(partition, code) else {
        return;
    };
    if !endpoints.iter().any(|e| e.node_id.0 == leader.0) {
        let mut known = NodeEndpoint::default();
        known.node_id = BrokerId(leader.0);
        known.host = super::str_bytes(&endpoint.host);
        known.port = endpoint.port;
        known.rack = endpoint.rack.as_deref().map(super::str_bytes);
        endpoints.push(known);
    }
}
