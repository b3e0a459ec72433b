//! DeleteRecords (key 21): moves each partition's log start offset (offset -1 means the high
//! watermark) on its owner shard, durably.

use crate::error::code;
use crate::router::{ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle(shard: &Rc<Shard>, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut topic_result = DeleteRecordsTopicResult::default();
        topic_result.name = topic.name.clone();
        for partition in topic.partitions {
            let index = partition.partition_index;
            let request = ShardRequest::DeleteRecords {
                topic: name.clone(),
                partition: index,
                offset: partition.offset,
            };
            let outcome = match super::call_owner(shard, &name, index, request).await {
                Ok(ShardResponse::DeleteRecords(result)) => result,
                Ok(_) => Err(super::unexpected()),
                Err(error) => Err(error),
            };
            let mut entry = DeleteRecordsPartitionResult::default();
            entry.partition_index = index;
            match outcome {
                Ok(low_watermark) => {
                    entry.error_code = code::NONE;
                    entry.low_watermark = low_watermark;
                }
                Err(error) => {
                    entry.error_code = crate::error::error_code(&error);
                    entry.low_watermark = -1;
                }
            }
            topic_result.partitions.push(entry);
        }
        response.topics.push(topic_result);
    }
    response
}
