//! OffsetDelete (key 47, KIP-496): deletes a group's committed offsets for some partitions.
//! As in Kafka: a partition of an unknown topic, or past the topic's partitions, answers
//! UNKNOWN_TOPIC_OR_PARTITION; an unknown group GROUP_ID_NOT_FOUND; a group with members
//! deletes the offsets of topics none of them is subscribed to and answers
//! GROUP_SUBSCRIBED_TO_TOPIC for the others, and a group with members that is not a consumer
//! group (another protocol type) NON_EMPTY_GROUP, alone.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, Result, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::{requests::DeleteOffsets, OffsetsDeleted};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (0, 0);

/// Deletes a group's offsets (`None`: all of them, and the group) on its coordinator.
pub(super) async fn delete_offsets<S: Storage>(
    node: &Node<S>,
    group: &str,
    partitions: Option<Vec<TopicPartition>>,
) -> Result<OffsetsDeleted> {
    node.groups.call(group, DeleteOffsets { group: group.to_string(), partitions }).await?
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group = request.group_id.0.to_string();
    // As Kafka: DELETE on the group, then READ on each topic.
    if !node.allowed(context, AclOperation::Delete, Resource::Group(&group)) {
        let mut response = OffsetDeleteResponse::default();
        response.error_code = error_code(&BrokerError::GroupAuthorizationFailed(group));
        return response;
    }
    let readable = |topic: &str| node.allowed(context, AclOperation::Read, Resource::Topic(topic));
    let image = node.metadata();
    let exists = |partition: &TopicPartition| {
        image.topic(&partition.topic).is_some_and(|topic| {
            partition.partition.0 >= 0 && partition.partition.0 < topic.partition_count()
        })
    };
    let requested: Vec<TopicPartition> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| TopicPartition::new(t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let known: Vec<TopicPartition> =
        requested.iter().filter(|p| exists(p) && readable(&p.topic)).cloned().collect();
    let mut response = OffsetDeleteResponse::default();
    let outcome = match delete_offsets(node, &group, Some(known)).await {
        Ok(outcome) => outcome,
        Err(error) => {
            // A group-level error comes alone, as Kafka answers it.
            response.error_code = error_code(&error);
            return response;
        }
    };
    response.error_code = NONE;
    let subscribed = error_code(&BrokerError::Group(GroupError::GroupSubscribedToTopic));
    let unknown = error_code(&BrokerError::UnknownTopicOrPartition(String::new()));
    let refused = error_code(&BrokerError::TopicAuthorizationFailed(String::new()));
    for topic in request.topics {
        let mut entry = OffsetDeleteResponseTopic::default();
        entry.partitions = topic
            .partitions
            .iter()
            .map(|p| {
                let key = TopicPartition::new(topic.name.0.to_string(), p.partition_index);
                let mut partition = OffsetDeleteResponsePartition::default();
                partition.partition_index = p.partition_index;
                partition.error_code = if !readable(&key.topic) {
                    refused
                } else if !exists(&key) {
                    unknown
                } else if outcome.subscribed.contains(&key) {
                    subscribed
                } else {
                    NONE
                };
                partition
            })
            .collect();
        entry.name = topic.name;
        response.topics.push(entry);
    }
    response
}
