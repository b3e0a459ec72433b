//! DescribeShareGroupOffsets (key 90, KIP-932): each partition's share-partition start offset
//! of a share group, as its share coordinator keeps it (`-1`: the group has no state there).
//! DESCRIBE on the group is required (else GROUP_AUTHORIZATION_FAILED for the group) and on
//! each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions). A null topic list means
//! every partition of the group's state index (as Kafka: the partitions with state), under
//! the topics' names now (a deleted topic is left out). An unknown topic answers a nil topic
//! id and start offset -1.
//! References: KIP-932 ("DescribeShareGroupOffsets"); Kafka
//! `KafkaApis.handleDescribeShareGroupOffsetsRequest`.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::requests::ShareDescribe;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 0);

/// The topics of a group asked with a null list: its state index, by the topics' names now
/// (none for a group that is not a share group here). Only its coordinator knows the index:
/// another broker answers NOT_COORDINATOR, as Kafka's do.
async fn indexed<S: Storage>(
    node: &Node<S>,
    group: &str,
) -> Result<Vec<(String, Vec<i32>)>, BrokerError> {
    let described = node.groups.call(group, ShareDescribe { group: group.to_string() }).await?;
    let Some(described) = described else { return Ok(Vec::new()) };
    let image = node.metadata();
    let mut topics: Vec<(String, Vec<i32>)> = described
        .state_index
        .iter()
        .filter_map(|(topic_id, topic)| {
            let now = image.topic_by_id(topic_id)?;
            Some((now.name.clone(), topic.partitions.iter().copied().collect()))
        })
        .collect();
    topics.sort();
    Ok(topics)
}

async fn topic_answer<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    group: &str,
    topic: String,
    partitions: Vec<i32>,
) -> DescribeShareGroupOffsetsResponseTopic {
    let image = node.metadata();
    let mut out = DescribeShareGroupOffsetsResponseTopic::default();
    out.topic_name = TopicName(StrBytes::from_string(topic.clone()));
    let allowed = node.allowed(context, AclOperation::Describe, Resource::Topic(&topic));
    let topic_id = image.topic(&topic).map(|t| t.topic_id);
    out.topic_id = topic_id.map_or(uuid::Uuid::nil(), uuid::Uuid::from_bytes);
    for partition in partitions {
        let mut answer = DescribeShareGroupOffsetsResponsePartition::default();
        answer.partition_index = partition;
        answer.start_offset = -1;
        answer.leader_epoch = -1;
        if !allowed {
            let error = BrokerError::TopicAuthorizationFailed(topic.clone());
            answer.error_code = error_code(&error);
            answer.error_message = Some(StrBytes::from_string(error.to_string()));
        } else if let Some(topic_id) = topic_id {
            let key = (group.to_string(), topic_id, partition);
            if let Ok(Some(state)) = node.share_state.read(&key, -1).await {
                answer.start_offset = state.state.start_offset;
            }
        }
        out.partitions.push(answer);
    }
    out
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let mut response = DescribeShareGroupOffsetsResponse::default();
    for asked in request.groups {
        let group = asked.group_id.0.to_string();
        let mut out = DescribeShareGroupOffsetsResponseGroup::default();
        out.group_id = asked.group_id;
        if !node.allowed(context, AclOperation::Describe, Resource::Group(&group)) {
            let error = BrokerError::GroupAuthorizationFailed(group.clone());
            out.error_code = error_code(&error);
            out.error_message = Some(StrBytes::from_string(error.to_string()));
            response.groups.push(out);
            continue;
        }
        let topics: Vec<(String, Vec<i32>)> = match asked.topics {
            Some(topics) => {
                topics.into_iter().map(|t| (t.topic_name.0.to_string(), t.partitions)).collect()
            }
            None => match indexed(node, &group).await {
                Ok(topics) => topics,
                Err(error) => {
                    out.error_code = error_code(&error);
                    out.error_message = Some(StrBytes::from_string(error.to_string()));
                    response.groups.push(out);
                    continue;
                }
            },
        };
        for (topic, partitions) in topics {
            out.topics.push(topic_answer(node, context, &group, topic, partitions).await);
        }
        response.groups.push(out);
    }
    response
}
