//! AddPartitionsToTxn (key 24). v0-3 are the client form: one transaction, whose partitions
//! the coordinator adds to it. v4 is the broker-to-broker form (KIP-890 part 1): a batch of
//! transactions, each either added or, with `verify_only`, only checked (partition
//! verification: is each partition in the producer's ongoing transaction?).
//! As Kafka, when adding: an unknown partition is answered UNKNOWN_TOPIC_OR_PARTITION and
//! every other one OPERATION_NOT_ATTEMPTED, nothing added; otherwise every partition gets the
//! coordinator's answer. A verification answers per partition: NONE or INVALID_TXN_STATE, or
//! the coordinator's error for all of them. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before
//! v2. With the authorizer on, as Kafka: v4 needs CLUSTER_ACTION on the cluster (brokers
//! only); the client form WRITE on the transactional id (else every partition is
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (else its partitions are
//! TOPIC_AUTHORIZATION_FAILED and the rest OPERATION_NOT_ATTEMPTED, nothing added).

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, txn_error_code, BrokerError, VerifyError, NONE};
use crate::metadata::internal::is_internal;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::transactions::requests::{AddPartitions, Verify};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (0, 4);
/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_VERSION: i16 = 2;
/// The first broker-to-broker version (a batch of transactions, `verify_only`).
const BROKER_VERSION: i16 = 4;

/// One transaction of a request.
struct Transaction {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    partitions: Vec<TopicPartition>,
}

fn partitions_of(topics: &[AddPartitionsToTxnTopic]) -> Vec<TopicPartition> {
    topics
        .iter()
        .flat_map(|topic| {
            let name = topic.name.0.to_string();
            topic.partitions.iter().map(move |p| TopicPartition::new(name.clone(), *p))
        })
        .collect()
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let mut response = AddPartitionsToTxnResponse::default();
    let version = context.api_version;
    if version < BROKER_VERSION {
        let transaction = Transaction {
            transactional_id: request.v3_and_below_transactional_id.0.to_string(),
            producer_id: request.v3_and_below_producer_id.0,
            producer_epoch: request.v3_and_below_producer_epoch,
            verify_only: false,
            partitions: partitions_of(&request.v3_and_below_topics),
        };
        let codes = answer(node, context, version, &transaction).await;
        response.results_by_topic_v3_and_below = topic_results(codes);
        return response;
    }
    if !node.allowed(context, AclOperation::ClusterAction, Resource::Cluster) {
        response.error_code = error_code(&BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    for entry in &request.transactions {
        let transaction = Transaction {
            transactional_id: entry.transactional_id.0.to_string(),
            producer_id: entry.producer_id.0,
            producer_epoch: entry.producer_epoch,
            verify_only: entry.verify_only,
            partitions: partitions_of(&entry.topics),
        };
        let codes = answer(node, context, version, &transaction).await;
        let mut result = AddPartitionsToTxnResult::default();
        result.transactional_id = entry.transactional_id.clone();
        result.topic_results = topic_results(codes);
        response.results_by_transaction.push(result);
    }
    response
}

/// Each partition of `transaction` with its code.
async fn answer<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    version: i16,
    transaction: &Transaction,
) -> Vec<(TopicPartition, i16)> {
    if transaction.verify_only {
        return verify(node, version, transaction).await;
    }
    if let Some(codes) = refusal(node, context, transaction) {
        return codes;
    }
    add(node, version, transaction).await
}

/// Partition verification: each partition with NONE when it is in the producer's transaction.
async fn verify<S: Storage>(
    node: &Node<S>,
    version: i16,
    transaction: &Transaction,
) -> Vec<(TopicPartition, i16)> {
    let wanted = &transaction.partitions;
    let transactional_id = &transaction.transactional_id;
    let call = Verify {
        transactional_id: transactional_id.clone(),
        producer_id: transaction.producer_id,
        producer_epoch: transaction.producer_epoch,
        partitions: wanted.clone(),
    };
    let answer = node.transactions.call(transactional_id, call).await.and_then(|verified| verified);
    let outside = error_code(&BrokerError::Verify(VerifyError::NotInTransaction));
    // One answer per partition asked, in order (`TransactionService::verify`).
    let codes: Vec<i16> = match answer {
        Ok(verified) => {
            verified.into_iter().map(|inside| if inside { NONE } else { outside }).collect()
        }
        Err(error) => {
            vec![txn_error_code(&error, version, PRODUCER_FENCED_VERSION); wanted.len()]
        }
    };
    wanted.iter().cloned().zip(codes).collect()
}

/// The refused answer for every partition when the principal may not add them, else `None`.
fn refusal<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    transaction: &Transaction,
) -> Option<Vec<(TopicPartition, i16)>> {
    let wanted = &transaction.partitions;
    let transactional_id = &transaction.transactional_id;
    let id = Resource::TransactionalId(transactional_id);
    if !node.allowed(context, AclOperation::Write, id) {
        let refused = BrokerError::TransactionalIdAuthorizationFailed(transactional_id.clone());
        let code = error_code(&refused);
        return Some(wanted.iter().map(|partition| (partition.clone(), code)).collect());
    }
    let refused = |partition: &TopicPartition| {
        !node.allowed(context, AclOperation::Write, Resource::Topic(&partition.topic))
    };
    if !wanted.iter().any(refused) {
        return None;
    }
    let codes: Vec<(TopicPartition, i16)> = wanted
        .iter()
        .map(|partition| match refused(partition) {
            true => {
                let topic = partition.topic.clone();
                (partition.clone(), error_code(&BrokerError::TopicAuthorizationFailed(topic)))
            }
            false => (partition.clone(), error_code(&BrokerError::OperationNotAttempted)),
        })
        .collect();
    Some(codes)
}

/// Adds the partitions to the transaction unless one is unknown; each partition with its code.
async fn add<S: Storage>(
    node: &Node<S>,
    version: i16,
    transaction: &Transaction,
) -> Vec<(TopicPartition, i16)> {
    let wanted = &transaction.partitions;
    let transactional_id = &transaction.transactional_id;
    let image = node.metadata();
    // Clients may not add internal topics' partitions (AddOffsetsToTxn adds the group's).
    let unknown = |partition: &TopicPartition| {
        image.placement(partition).is_none() || is_internal(&partition.topic)
    };
    let outcome = if wanted.iter().any(unknown) {
        None
    } else {
        let call = AddPartitions {
            transactional_id: transactional_id.clone(),
            producer_id: transaction.producer_id,
            producer_epoch: transaction.producer_epoch,
            partitions: wanted.clone(),
        };
        Some(match node.transactions.call(transactional_id, call).await.and_then(|added| added) {
            Ok(()) => NONE,
            Err(error) => {
                tracing::debug!(%error, "AddPartitionsToTxn refused");
                txn_error_code(&error, version, PRODUCER_FENCED_VERSION)
            }
        })
    };
    wanted
        .iter()
        .map(|partition| {
            let code = match outcome {
                Some(code) => code,
                None if unknown(partition) => {
                    error_code(&BrokerError::UnknownTopicOrPartition(partition.to_string()))
                }
                None => error_code(&BrokerError::OperationNotAttempted),
            };
            (partition.clone(), code)
        })
        .collect()
}

/// The per-topic answer of (partition, code) pairs, topics in first-seen order.
fn topic_results(codes: Vec<(TopicPartition, i16)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (partition, code) in codes {
        let mut result = AddPartitionsToTxnPartitionResult::default();
        result.partition_index = partition.partition.0;
        result.partition_error_code = code;
        let topic = match topics.iter_mut().position(|t| t.name.0.as_str() == partition.topic) {
            Some(index) => &mut topics[index],
            None => {
                let mut topic = AddPartitionsToTxnTopicResult::default();
                topic.name =
                    kafka_protocol::messages::TopicName(super::str_bytes(&partition.topic));
                topics.push(topic);
                topics.last_mut().expect("just pushed")
            }
        };
        topic.results_by_partition.push(result);
    }
    topics
}
