//! ListOffsets (key 2): earliest (-2), latest (-1) and by timestamp, per partition on its owner.

use super::error_fields;
use crate::error::code;
use crate::router::{ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (1, 7);

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut topic_response = ListOffsetsTopicResponse::default();
        topic_response.name = topic.name.clone();
        for partition in topic.partitions {
            let index = partition.partition_index;
            let request = ShardRequest::ListOffset {
                topic: name.clone(),
                partition: index,
                timestamp: partition.timestamp,
            };
            let outcome = match super::call_owner(shard, &name, index, request).await {
                Ok(ShardResponse::ListOffset(result)) => result,
                Ok(_) => Err(super::unexpected()),
                Err(error) => Err(error),
            };
            let mut entry = ListOffsetsPartitionResponse::default();
            entry.partition_index = index;
            match outcome {
                Ok(Some((offset, timestamp))) => {
                    entry.error_code = code::NONE;
                    entry.offset = offset;
                    entry.timestamp = timestamp;
                    if version >= 4 {
                        entry.leader_epoch = 0;
                    }
                }
                Ok(None) => {
                    entry.error_code = code::NONE;
                    entry.offset = -1;
                    entry.timestamp = -1;
                }
                Err(error) => {
                    entry.error_code = error_fields(&error).0;
                    entry.offset = -1;
                    entry.timestamp = -1;
                }
            }
            topic_response.partitions.push(entry);
        }
        response.topics.push(topic_response);
    }
    response
}
