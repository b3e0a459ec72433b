//! ConsumerGroupHeartbeat (key 68, KIP-848): a member of a consumer group joins, stays, says
//! what it owns and gets its assignment from the broker's assignor; epoch -1 leaves, -2 leaves
//! for now (a static member). Authorization as Kafka: READ on the group, DESCRIBE on every
//! subscribed topic name (KAFKA-18813); the request is validated before the group is touched.
//! References: KIP-848; Kafka `KafkaApis.handleConsumerGroupHeartbeat`.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::consumer::{heartbeat, ConsumerConfig, HeartbeatRequest, Partitions};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 1);

fn failed(error: &BrokerError) -> ConsumerGroupHeartbeatResponse {
    let mut response = ConsumerGroupHeartbeatResponse::default();
    response.error_code = error_code(error);
    response.error_message = Some(StrBytes::from_string(error.to_string()));
    response
}

/// The request as the coordinator takes it (a v0 member without an id gets one here).
fn request_of(
    context: &RequestContext,
    request: &ConsumerGroupHeartbeatRequest,
) -> HeartbeatRequest {
    let owned = request.topic_partitions.as_ref().map(|topics| {
        let mut owned = Partitions::new();
        for topic in topics {
            owned.entry(*topic.topic_id.as_bytes()).or_default().extend(topic.partitions.iter());
        }
        owned
    });
    let mut member_id = request.member_id.to_string();
    if member_id.is_empty() && request.member_epoch == 0 && context.api_version == 0 {
        member_id = uuid::Uuid::new_v4().to_string();
    }
    HeartbeatRequest {
        group_id: request.group_id.0.to_string(),
        member_id,
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(|i| i.to_string()),
        rack_id: request.rack_id.as_ref().map(|r| r.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.0.to_string()).collect()),
        subscribed_topic_regex: request.subscribed_topic_regex.as_ref().map(|r| r.to_string()),
        server_assignor: request.server_assignor.as_ref().map(|a| a.to_string()),
        owned,
        client_id: context.client_id().to_string(),
        client_host: context.client_host(),
        principal: context.principal.to_string(),
        host: context.client_address.ip().to_string(),
    }
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let group = request.group_id.0.to_string();
    if !node.allowed(context, AclOperation::Read, Resource::Group(&group)) {
        return failed(&BrokerError::GroupAuthorizationFailed(group));
    }
    let names = request.subscribed_topic_names.iter().flatten();
    let refused = names
        .filter(|name| !node.allowed(context, AclOperation::Describe, Resource::Topic(&name.0)))
        .map(|name| name.0.to_string())
        .next();
    if let Some(topic) = refused {
        return failed(&BrokerError::TopicAuthorizationFailed(topic));
    }
    let call = request_of(context, &request);
    let config = ConsumerConfig::from_settings(&node.config.consumer_groups);
    if let Err(error) = heartbeat::validate(&call, context.api_version, &config) {
        return failed(&BrokerError::Group(error));
    }
    let answer = match node.groups.call(&group, call).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) | Err(BrokerError::Group(error)) => {
            return failed(&BrokerError::Group(error))
        }
        Err(_) => return failed(&BrokerError::Group(GroupError::CoordinatorNotAvailable)),
    };
    let mut response = ConsumerGroupHeartbeatResponse::default();
    response.member_id = Some(StrBytes::from_string(answer.member_id));
    response.member_epoch = answer.member_epoch;
    response.heartbeat_interval_ms = answer.heartbeat_interval_ms;
    response.assignment = answer.assignment.map(|assigned| {
        let mut assignment = Assignment::default();
        assignment.topic_partitions = assigned
            .into_iter()
            .map(|(topic_id, partitions)| {
                let mut topic = TopicPartitions::default();
                topic.topic_id = uuid::Uuid::from_bytes(topic_id);
                topic.partitions = partitions.into_iter().collect();
                topic
            })
            .collect();
        assignment
    });
    response
}
