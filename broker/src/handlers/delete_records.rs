//! DeleteRecords (key 21): moves each partition's log start offset (offset -1 means the high
//! watermark) on its owner shard, durably.

use super::error_fields;
use crate::authorization::{AclOperation, Resource};
use crate::error::{Result, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::partitions::requests::DeleteRecords;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use shard::io::Storage;
use wire::ids::{Offset, TopicPartition};

pub const VERSIONS: (i16, i16) = (0, 2);

async fn delete<S: Storage>(
    node: &Node<S>,
    partition: TopicPartition,
    offset: Offset,
) -> Result<Offset> {
    node.partitions.call(&partition, DeleteRecords { partition: partition.clone(), offset }).await?
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut topic_result = DeleteRecordsTopicResult::default();
        topic_result.name = topic.name.clone();
        let refused = !node.allowed(context, AclOperation::Delete, Resource::Topic(&name));
        for partition in topic.partitions {
            let index = partition.partition_index;
            let outcome = if refused {
                Err(crate::error::BrokerError::TopicAuthorizationFailed(name.clone()))
            } else {
                delete(node, TopicPartition::new(name.clone(), index), Offset(partition.offset))
                    .await
            };
            let mut entry = DeleteRecordsPartitionResult::default();
            entry.partition_index = index;
            match outcome {
                Ok(low_watermark) => {
                    entry.error_code = NONE;
                    entry.low_watermark = low_watermark.0;
                }
                Err(error) => {
                    entry.error_code = error_fields(&error).0;
                    entry.low_watermark = -1;
                }
            }
            topic_result.partitions.push(entry);
        }
        response.topics.push(topic_result);
    }
    response
}
