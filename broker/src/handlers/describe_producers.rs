//! DescribeProducers (key 61, KIP-664): the idempotent producers each partition tracks (id,
//! epoch, last sequence, last timestamp), read on the partition's owner shard. No transactions
//! yet, so `coordinator_epoch` and `current_txn_start_offset` are always -1.

use super::error_fields;
use crate::router::{ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle(
    shard: &Rc<Shard>,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut response = DescribeProducersResponse::default();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut entry = TopicResponse::default();
        entry.name = topic.name.clone();
        for index in topic.partition_indexes {
            let mut partition = PartitionResponse::default();
            partition.partition_index = index;
            let ask = ShardRequest::Producers { topic: name.clone(), partition: index };
            let answer = match super::call_owner(shard, &name, index, ask).await {
                Ok(ShardResponse::Producers(result)) => result,
                Ok(_) => Err(super::unexpected()),
                Err(error) => Err(error),
            };
            match answer {
                Ok(producers) => {
                    partition.active_producers = producers
                        .into_iter()
                        .map(|(id, epoch, last_sequence, last_timestamp)| {
                            let mut state = ProducerState::default();
                            state.producer_id = ProducerId(id);
                            state.producer_epoch = i32::from(epoch);
                            state.last_sequence = last_sequence;
                            state.last_timestamp = last_timestamp;
                            state.coordinator_epoch = -1;
                            state.current_txn_start_offset = -1;
                            state
                        })
                        .collect();
                }
                Err(error) => {
                    let (code, message) = error_fields(&error);
                    partition.error_code = code;
                    partition.error_message = message;
                }
            }
            entry.partitions.push(partition);
        }
        response.topics.push(entry);
    }
    response
}
