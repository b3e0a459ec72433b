//! Produce (key 0): appends each partition's batches on the shard that owns the partition,
//! concurrently across partitions.
//!
//! Durability rule: acks=-1 (all) returns once the batches are durable under the topic's flush
//! policy (`always`: group-committed fdatasync; `interval:<ms>`/`never`: in the log); acks=1
//! returns once they are in the log; acks=0 sends no response at all.
//! Versions 3+ only: they carry v2 record batches, the only format strata stores.

use super::error_fields;
use crate::error::{code, BrokerError};
use crate::router::{call, ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (3, 9);

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: ProduceRequest,
) -> Option<ProduceResponse> {
    let acks = request.acks;
    let acks_valid = (-1..=1).contains(&acks);
    let mut pending = Vec::new();
    for topic in &request.topic_data {
        let name = topic.name.0.to_string();
        for partition in &topic.partition_data {
            let shard = shard.clone();
            let name = name.clone();
            let index = partition.index;
            let records = partition.records.clone().unwrap_or_default();
            pending.push(async move {
                let outcome = if !acks_valid {
                    Err(BrokerError::InvalidRequiredAcks(acks))
                } else if shard
                    .snapshot()
                    .topics
                    .get(&name)
                    .is_none_or(|t| index < 0 || index >= t.partitions)
                {
                    Err(BrokerError::UnknownTopicOrPartition(format!("{name}-{index}")))
                } else {
                    let owner = shard.owner_of(&name, index);
                    let request = ShardRequest::Append {
                        topic: name.clone(),
                        partition: index,
                        records,
                        sync: acks == -1,
                    };
                    match call(&shard, owner, request).await {
                        ShardResponse::Append(result) => result,
                        ShardResponse::Unavailable(reason) => {
                            Err(BrokerError::ShardUnavailable(reason))
                        }
                        _ => Err(BrokerError::ShardUnavailable("unexpected answer".into())),
                    }
                };
                (name, index, outcome)
            });
        }
    }
    let outcomes = futures_util::future::join_all(pending).await;
    if acks == 0 {
        for (name, index, outcome) in &outcomes {
            if let Err(error) = outcome {
                tracing::debug!(topic = %name, partition = index, %error, "acks=0 produce failed");
            }
        }
        return None;
    }
    let mut response = ProduceResponse::default();
    for (name, index, outcome) in outcomes {
        let mut partition = PartitionProduceResponse::default();
        partition.index = index;
        partition.log_append_time_ms = -1;
        match outcome {
            Ok(result) => {
                partition.error_code = code::NONE;
                partition.base_offset = result.base_offset;
                if version >= 5 {
                    partition.log_start_offset = result.log_start_offset;
                }
            }
            Err(error) => {
                let (error_code, message) = error_fields(&error);
                shard.stats.borrow_mut().count_error(error_code);
                partition.error_code = error_code;
                if version >= 8 {
                    partition.error_message = message;
                }
                partition.base_offset = -1;
            }
        }
        match response.responses.iter_mut().find(|topic| topic.name.0.as_str() == name) {
            Some(topic) => topic.partition_responses.push(partition),
            None => {
                let mut topic = TopicProduceResponse::default();
                topic.name = kafka_protocol::messages::TopicName(super::str_bytes(&name));
                topic.partition_responses.push(partition);
                response.responses.push(topic);
            }
        }
    }
    Some(response)
}
