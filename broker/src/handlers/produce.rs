//! Produce (key 0): appends each partition's batches on the shard that owns the partition,
//! concurrently across partitions.
//!
//! Durability rule: acks=-1 (all) returns once the batches are durable under the topic's flush
//! policy (`always`: group-committed fdatasync; `interval:<ms>`/`never`: in the log); acks=1
//! returns once they are in the log; acks=0 sends no response at all.
//! Versions 3+ only: they carry v2 record batches, the only format strata stores. Internal
//! topics (`__consumer_offsets`) refuse client batches with INVALID_TOPIC_EXCEPTION.

use super::{error_fields, unexpected};
use crate::error::{BrokerError, Result, NONE};
use crate::metadata::internal::is_internal;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::partitions::{AppendResult, PartitionRequest, PartitionResponse};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (3, 9);

async fn append<S: Storage>(
    node: &Node<S>,
    partition: &TopicPartition,
    records: bytes::Bytes,
    acks: i16,
) -> Result<AppendResult> {
    if !(-1..=1).contains(&acks) {
        return Err(BrokerError::InvalidRequiredAcks(acks));
    }
    // Only the broker writes its internal topics (a forged record would become a group's
    // committed offset after a restart), as in Kafka.
    if is_internal(&partition.topic) {
        return Err(BrokerError::InvalidTopic(format!(
            "{} is internal: clients cannot produce to it",
            partition.topic
        )));
    }
    let request =
        PartitionRequest::Append { partition: partition.clone(), records, sync: acks == -1 };
    match node.partition_call(partition, request).await? {
        PartitionResponse::Append(result) => result,
        _ => Err(unexpected()),
    }
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ProduceRequest,
) -> Option<ProduceResponse> {
    let acks = request.acks;
    let mut pending = Vec::new();
    for topic in &request.topic_data {
        for data in &topic.partition_data {
            let partition = TopicPartition::new(topic.name.0.to_string(), data.index);
            let records = data.records.clone().unwrap_or_default();
            pending.push(async move {
                let outcome = append(node, &partition, records, acks).await;
                (partition, outcome)
            });
        }
    }
    let outcomes = futures_util::future::join_all(pending).await;
    if acks == 0 {
        for (partition, outcome) in &outcomes {
            if let Err(error) = outcome {
                tracing::debug!(%partition, %error, "acks=0 produce failed");
            }
        }
        return None;
    }
    let version = context.api_version;
    let mut response = ProduceResponse::default();
    for (key, outcome) in outcomes {
        let mut partition = PartitionProduceResponse::default();
        partition.index = key.partition.0;
        partition.log_append_time_ms = -1;
        match outcome {
            Ok(result) => {
                partition.error_code = NONE;
                partition.base_offset = result.base_offset.0;
                if version >= 5 {
                    partition.log_start_offset = result.log_start_offset.0;
                }
            }
            Err(error) => {
                let (error_code, message) = error_fields(&error);
                node.stats.count_error(error_code);
                partition.error_code = error_code;
                if version >= 8 {
                    partition.error_message = message;
                }
                partition.base_offset = -1;
            }
        }
        match response.responses.iter_mut().find(|topic| topic.name.0.as_str() == key.topic) {
            Some(topic) => topic.partition_responses.push(partition),
            None => {
                let mut topic = TopicProduceResponse::default();
                topic.name = kafka_protocol::messages::TopicName(super::str_bytes(&key.topic));
                topic.partition_responses.push(partition);
                response.responses.push(topic);
            }
        }
    }
    Some(response)
}
