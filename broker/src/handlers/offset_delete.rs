//! OffsetDelete (key 47, KIP-496): deletes a group's committed offsets for some partitions,
//! only while the group has no members (NON_EMPTY_GROUP), for known groups (GROUP_ID_NOT_FOUND).

use crate::error::{error_code, BrokerError, GroupError, Result, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::{GroupRequest, GroupResponse};
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
) -> Result<Vec<TopicPartition>> {
    let request = GroupRequest::DeleteOffsets { group: group.to_string(), partitions };
    match node.group_call(group, request).await? {
        GroupResponse::DeleteOffsets(result) => result,
        _ => Err(BrokerError::Group(GroupError::CoordinatorNotAvailable)),
    }
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    _context: &RequestContext,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group = request.group_id.0.to_string();
    let partitions: Vec<TopicPartition> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| TopicPartition::new(t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let mut response = OffsetDeleteResponse::default();
    if let Err(error) = delete_offsets(node, &group, Some(partitions)).await {
        // A group-level error comes alone, as Kafka answers it.
        response.error_code = error_code(&error);
        return response;
    }
    response.error_code = NONE;
    for topic in request.topics {
        let mut entry = OffsetDeleteResponseTopic::default();
        entry.name = topic.name;
        entry.partitions = topic
            .partitions
            .iter()
            .map(|p| {
                let mut partition = OffsetDeleteResponsePartition::default();
                partition.partition_index = p.partition_index;
                partition.error_code = NONE;
                partition
            })
            .collect();
        response.topics.push(entry);
    }
    response
}
