//! AddPartitionsToTxn (key 24), v0-3 (the client form; v4+ is broker-to-broker verification,
//! KIP-890, not served yet): adds partitions to the producer's transaction on its coordinator.
//! As Kafka: an unknown partition is answered UNKNOWN_TOPIC_OR_PARTITION and every other one
//! OPERATION_NOT_ATTEMPTED, nothing added; otherwise every partition gets the coordinator's
//! answer. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.

use crate::error::{txn_error_code, NONE};
use crate::metadata::internal::is_internal;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::transactions::TxnRequest;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (0, 3);
/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_VERSION: i16 = 2;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let mut response = AddPartitionsToTxnResponse::default();
    let image = node.metadata();
    let wanted: Vec<TopicPartition> = request
        .v3_and_below_topics
        .iter()
        .flat_map(|topic| {
            let name = topic.name.0.to_string();
            topic.partitions.iter().map(move |p| TopicPartition::new(name.clone(), *p))
        })
        .collect();
    // Clients may not add internal topics' partitions (AddOffsetsToTxn adds the group's).
    let unknown = |partition: &TopicPartition| {
        image.placement(partition).is_none() || is_internal(&partition.topic)
    };
    let code_for = |partition: &TopicPartition, outcome: Option<i16>| match outcome {
        Some(code) => code,
        None if unknown(partition) => ResponseError::UnknownTopicOrPartition.code(),
        None => ResponseError::OperationNotAttempted.code(),
    };
    let outcome = if wanted.iter().any(unknown) {
        None
    } else {
        let transactional_id = request.v3_and_below_transactional_id.0.to_string();
        let call = TxnRequest::AddPartitions {
            transactional_id: transactional_id.clone(),
            producer_id: request.v3_and_below_producer_id.0,
            producer_epoch: request.v3_and_below_producer_epoch,
            partitions: wanted.clone(),
        };
        let result = node.txn_done(&transactional_id, call).await;
        Some(match result {
            Ok(()) => NONE,
            Err(error) => {
                tracing::debug!(%error, "AddPartitionsToTxn refused");
                txn_error_code(&error, context.api_version, PRODUCER_FENCED_VERSION)
            }
        })
    };
    for partition in &wanted {
        let code = code_for(partition, outcome);
        let mut result = AddPartitionsToTxnPartitionResult::default();
        result.partition_index = partition.partition.0;
        result.partition_error_code = code;
        let topic = match response
            .results_by_topic_v3_and_below
            .iter_mut()
            .position(|topic| topic.name.0.as_str() == partition.topic)
        {
            Some(index) => &mut response.results_by_topic_v3_and_below[index],
            None => {
                let mut topic = AddPartitionsToTxnTopicResult::default();
                topic.name =
                    kafka_protocol::messages::TopicName(super::str_bytes(&partition.topic));
                response.results_by_topic_v3_and_below.push(topic);
                response.results_by_topic_v3_and_below.last_mut().expect("just pushed")
            }
        };
        topic.results_by_partition.push(result);
    }
    response
}
