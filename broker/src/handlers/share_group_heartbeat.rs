//! ShareGroupHeartbeat (key 76, KIP-932): a member of a share group joins (epoch 0, with its
//! subscribed topics), stays, or leaves (-1), and gets the partitions it fetches from, as the
//! broker's simple assignor spreads them. Authorization as Kafka: READ on the group, DESCRIBE
//! on every subscribed topic; the request is validated before the group is touched.
//! References: KIP-932; Kafka `KafkaApis.handleShareGroupHeartbeat`.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::share::{validate, ShareHeartbeat};
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (1, 1);

fn failed(error: &BrokerError) -> ShareGroupHeartbeatResponse {
    let mut response = ShareGroupHeartbeatResponse::default();
    response.error_code = error_code(error);
    response.error_message = Some(StrBytes::from_string(error.to_string()));
    response
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
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
    let call = ShareHeartbeat {
        group_id: group.clone(),
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        rack_id: request.rack_id.as_ref().map(|rack| rack.to_string()),
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|name| name.0.to_string()).collect()),
        client_id: context.client_id().to_string(),
        client_host: context.client_host(),
    };
    if let Err(error) = validate(&call) {
        return failed(&BrokerError::Group(error));
    }
    let answer = match node.groups.call(&group, call).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) | Err(BrokerError::Group(error)) => {
            return failed(&BrokerError::Group(error))
        }
        Err(_) => return failed(&BrokerError::Group(GroupError::CoordinatorNotAvailable)),
    };
    let mut response = ShareGroupHeartbeatResponse::default();
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
