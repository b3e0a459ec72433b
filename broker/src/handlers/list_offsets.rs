//! ListOffsets (key 2): per partition on its owner, by timestamp or one of Kafka's special
//! timestamps: -1 latest, -2 earliest, -3 the largest timestamp (KIP-734, v7+), -4 earliest
//! local and -5 latest tiered (KIP-1005, v8+ and v9+; with no tiered storage -4 is the log
//! start and -5 no offset). A special timestamp newer than the request's version answers
//! UNSUPPORTED_VERSION, as in Kafka.

use super::error_fields;
use crate::authorization::{AclOperation, Resource};
use crate::error::{BrokerError, Result, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::partitions::requests::ListOffset;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use shard::io::Storage;
use wire::ids::{Offset, TopicPartition};

pub const VERSIONS: (i16, i16) = (1, 9);

async fn list_offset<S: Storage>(
    node: &Node<S>,
    partition: TopicPartition,
    timestamp: i64,
    read_committed: bool,
) -> Result<Option<(Offset, i64, i32)>> {
    let request = ListOffset { partition: partition.clone(), timestamp, read_committed };
    node.partitions.call(&partition, request).await?
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    let read_committed = context.api_version >= 2 && request.isolation_level == 1;
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut topic_response = ListOffsetsTopicResponse::default();
        topic_response.name = topic.name.clone();
        let refused = !node.allowed(context, AclOperation::Describe, Resource::Topic(&name));
        for partition in topic.partitions {
            let index = partition.partition_index;
            let key = TopicPartition::new(name.clone(), index);
            let newest_for = match partition.timestamp {
                -3 => 7,
                -4 => 8,
                -5 => 9,
                _ => 0,
            };
            let outcome = if refused {
                Err(BrokerError::TopicAuthorizationFailed(name.clone()))
            } else if context.api_version < newest_for {
                Err(BrokerError::UnsupportedVersion("ListOffsets", context.api_version))
            } else {
                match node.check_leader_epoch(&key, partition.current_leader_epoch) {
                    Ok(()) => list_offset(node, key, partition.timestamp, read_committed).await,
                    Err(error) => Err(error),
                }
            };
            let mut entry = ListOffsetsPartitionResponse::default();
            entry.partition_index = index;
            entry.offset = -1;
            entry.timestamp = -1;
            match outcome {
                Ok(Some((offset, timestamp, epoch))) => {
                    entry.error_code = NONE;
                    entry.offset = offset.0;
                    entry.timestamp = timestamp;
                    if context.api_version >= 4 {
                        entry.leader_epoch = epoch;
                    }
                }
                Ok(None) => entry.error_code = NONE,
                Err(error) => entry.error_code = error_fields(&error).0,
            }
            topic_response.partitions.push(entry);
        }
        response.topics.push(topic_response);
    }
    response
}
