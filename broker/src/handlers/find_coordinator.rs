//! FindCoordinator (key 10): a group's coordinator is the broker that leads its
//! `__consumer_offsets` partition, a transactional id's the one that leads its
//! `__transaction_state` partition (key type 1). In a cluster, the first request that finds
//! the topic missing creates it through the controller (as Kafka does) and is answered
//! COORDINATOR_NOT_AVAILABLE if it still cannot name one; clients retry. v4+ batches keys
//! (KIP-699).

use super::str_bytes;
use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::metadata::decide::MetadataChange;
use crate::metadata::internal::{
    partition_for_group, partition_for_transactional_id, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC,
};
use crate::node::{BrokerEndpoint, Node};
use crate::request_context::RequestContext;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (0, 4);

/// Kafka's `CoordinatorType.GROUP`.
const GROUP: i8 = 0;
/// Kafka's `CoordinatorType.TRANSACTION`.
const TRANSACTION: i8 = 1;

fn not_available() -> i16 {
    error_code(&BrokerError::Group(GroupError::CoordinatorNotAvailable))
}

/// The coordinator of `key`, or the error code to answer.
fn coordinator<S: Storage>(
    node: &Node<S>,
    listener: &str,
    key_type: i8,
    key: &str,
) -> std::result::Result<BrokerEndpoint, i16> {
    let partition = match key_type {
        GROUP => TopicPartition::new(OFFSETS_TOPIC, partition_for_group(key)),
        TRANSACTION => {
            TopicPartition::new(TRANSACTION_STATE_TOPIC, partition_for_transactional_id(key))
        }
        other => {
            return Err(error_code(&BrokerError::InvalidRequest(format!(
                "unknown coordinator type {other}"
            ))))
        }
    };
    if node.cluster.is_none() {
        return node
            .broker_on(node.node_id(), listener)
            .or_else(|| node.brokers_on(listener).into_iter().next())
            .ok_or_else(not_available);
    }
    let image = node.metadata();
    let leader = image.placement(&partition).ok_or_else(not_available)?.leader;
    node.broker_on(leader, listener).ok_or_else(not_available)
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let internal = match request.key_type {
        TRANSACTION => TRANSACTION_STATE_TOPIC,
        _ => OFFSETS_TOPIC,
    };
    if node.cluster.is_some() && node.metadata().topic(internal).is_none() {
        create_internal_topic(node, internal).await;
    }
    let mut response = FindCoordinatorResponse::default();
    let answer = |key: &str| authorized_coordinator(node, context, request.key_type, key);
    if context.api_version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let mut coordinator = Coordinator::default();
                coordinator.key = key.clone();
                match answer(key.as_str()) {
                    Ok(endpoint) => {
                        coordinator.node_id = BrokerId(endpoint.node.0);
                        coordinator.host = str_bytes(&endpoint.host);
                        coordinator.port = endpoint.port;
                        coordinator.error_code = NONE;
                    }
                    Err(code) => {
                        coordinator.node_id = BrokerId(-1);
                        coordinator.port = -1;
                        coordinator.error_code = code;
                    }
                }
                coordinator
            })
            .collect();
    } else {
        match answer(request.key.as_str()) {
            Ok(endpoint) => {
                response.error_code = NONE;
                response.node_id = BrokerId(endpoint.node.0);
                response.host = str_bytes(&endpoint.host);
                response.port = endpoint.port;
            }
            Err(code) => {
                response.error_code = code;
                response.node_id = BrokerId(-1);
                response.port = -1;
            }
        }
    }
    response
}

/// Asks the controller to create the missing internal topic `internal` (a cluster only).
async fn create_internal_topic<S: Storage>(node: &Node<S>, internal: &str) {
    // Kafka's KIP-115: created only with its full replication factor; until enough
    // brokers are live the answer is COORDINATOR_NOT_AVAILABLE and clients retry.
    let topic = if internal == OFFSETS_TOPIC {
        let mut topic = crate::metadata::startup::offsets_topic();
        topic.replication_factor = node.config.offsets_topic_replication_factor;
        topic
    } else {
        let mut topic = crate::metadata::startup::transaction_state_topic();
        let replicas = node.config.transaction_state_replication_factor;
        topic.replication_factor = replicas;
        // Kafka's transaction.state.log.min.isr, at most the replication factor (Kafka
        // takes it as given; a larger one could never be met).
        let min_isr = node.config.transaction_state_min_isr.min(replicas);
        topic.configs.insert("min.insync.replicas".to_string(), min_isr.to_string());
        topic
    };
    let create = MetadataChange::CreateTopics(vec![topic]);
    for result in node.metadata_router.change(create).await {
        match result {
            Ok(()) | Err(BrokerError::TopicAlreadyExists(_)) => {}
            Err(BrokerError::InvalidReplicationFactor(why)) => {
                tracing::debug!(%why, "{internal} waits for more brokers")
            }
            Err(error) => tracing::warn!(%error, "creating {internal}"),
        }
    }
}

/// The coordinator of `key` if the principal may describe it, or the error code to answer.
fn authorized_coordinator<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    key_type: i8,
    key: &str,
) -> std::result::Result<BrokerEndpoint, i16> {
    // As Kafka: DESCRIBE on the group or the transactional id.
    let refused = match key_type {
        GROUP if !node.allowed(context, AclOperation::Describe, Resource::Group(key)) => {
            Some(BrokerError::GroupAuthorizationFailed(key.to_string()))
        }
        TRANSACTION
            if !node.allowed(context, AclOperation::Describe, Resource::TransactionalId(key)) =>
        {
            Some(BrokerError::TransactionalIdAuthorizationFailed(key.to_string()))
        }
        _ => None,
    };
    match refused {
        Some(error) => Err(error_code(&error)),
        None => coordinator(node, &context.listener, key_type, key),
    }
}
