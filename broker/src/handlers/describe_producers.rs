//! DescribeProducers (key 61, KIP-664): the idempotent producers each partition tracks (id,
//! epoch, last sequence, last timestamp, and the first offset of its open transaction on the
//! partition, which `kafka-transactions.sh find-hanging` looks for), read on the partition's
//! owner shard. `coordinator_epoch` is not kept per partition: -1, as Kafka reports it for a
//! producer without markers.

use super::error_fields;
use crate::authorization::{AclOperation, Resource};
use crate::error::Result;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::partitions::{requests::Producers, ProducerSummary};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse as DescribedPartition, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (0, 0);

async fn producers<S: Storage>(
    node: &Node<S>,
    partition: TopicPartition,
) -> Result<Vec<ProducerSummary>> {
    node.partitions.call(&partition, Producers { partition: partition.clone() }).await?
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut response = DescribeProducersResponse::default();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut entry = TopicResponse::default();
        entry.name = topic.name.clone();
        for index in topic.partition_indexes {
            let mut partition = DescribedPartition::default();
            partition.partition_index = index;
            let outcome = if node.allowed(context, AclOperation::Read, Resource::Topic(&name)) {
                producers(node, TopicPartition::new(name.clone(), index)).await
            } else {
                Err(crate::error::BrokerError::TopicAuthorizationFailed(name.clone()))
            };
            match outcome {
                Ok(producers) => {
                    partition.active_producers = producers
                        .into_iter()
                        .map(|producer| {
                            let mut state = ProducerState::default();
                            state.producer_id = ProducerId(producer.producer_id);
                            state.producer_epoch = i32::from(producer.epoch);
                            state.last_sequence = producer.last_sequence;
                            state.last_timestamp = producer.last_timestamp;
                            state.coordinator_epoch = -1;
                            state.current_txn_start_offset =
                                producer.txn_first_offset.unwrap_or(-1);
                            state
                        })
                        .collect();
                }
                Err(error) => {
                    (partition.error_code, partition.error_message) = error_fields(&error);
                }
            }
            entry.partitions.push(partition);
        }
        response.topics.push(entry);
    }
    response
}
