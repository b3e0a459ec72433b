//! ConsumerGroupDescribe (key 69, KIP-848): a consumer group's state, epochs, assignor and
//! members with their current and target assignments. A group that is not a consumer group
//! (unknown, or classic) is GROUP_ID_NOT_FOUND, as in Kafka; admin clients then ask
//! DescribeGroups. DESCRIBE on the group is required.
//! References: KIP-848; Kafka `KafkaApis.handleConsumerGroupDescribe`.

use crate::authorization::{self, AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::metadata::image::MetadataImage;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::consumer::Partitions;
use crate::services::groups::requests::ConsumerDescribe;
use crate::services::groups::DescribedConsumerGroup;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 1);

/// Member type of v1: 1 for the consumer protocol, 0 for a classic member.
const MEMBER_TYPE_CONSUMER: i8 = 1;
const MEMBER_TYPE_CLASSIC: i8 = 0;

fn assignment(partitions: &Partitions, image: &MetadataImage) -> Assignment {
    let mut assignment = Assignment::default();
    assignment.topic_partitions = partitions
        .iter()
        .map(|(topic_id, partitions)| {
            let mut topic = TopicPartitions::default();
            topic.topic_id = uuid::Uuid::from_bytes(*topic_id);
            let name = image.topic_by_id(topic_id).map(|t| t.name.as_str()).unwrap_or_default();
            topic.topic_name = TopicName(StrBytes::from_string(name.to_string()));
            topic.partitions = partitions.iter().copied().collect();
            topic
        })
        .collect();
    assignment
}

fn described(group: DescribedConsumerGroup, image: &MetadataImage, version: i16) -> DescribedGroup {
    let mut out = DescribedGroup::default();
    out.group_state = StrBytes::from_static_str(group.state);
    out.group_epoch = group.epoch;
    out.assignment_epoch = group.assignment_epoch;
    out.assignor_name = StrBytes::from_string(group.assignor);
    out.members = group
        .members
        .into_iter()
        .map(|described| {
            let meta = &described.member.meta;
            let mut member = Member::default();
            member.member_id = StrBytes::from_string(meta.member_id.clone());
            member.instance_id = meta.instance_id.clone().map(StrBytes::from_string);
            member.rack_id = meta.rack_id.clone().map(StrBytes::from_string);
            member.member_epoch = described.member.epoch;
            member.client_id = StrBytes::from_string(meta.client_id.clone());
            member.client_host = StrBytes::from_string(meta.client_host.clone());
            member.subscribed_topic_names = meta
                .subscribed_topic_names
                .iter()
                .map(|name| TopicName(StrBytes::from_string(name.clone())))
                .collect();
            member.subscribed_topic_regex =
                meta.subscribed_topic_regex.clone().map(StrBytes::from_string);
            member.assignment = assignment(&described.member.assigned, image);
            member.target_assignment = assignment(&described.target, image);
            if version >= 1 {
                member.member_type = if described.member.is_classic() {
                    MEMBER_TYPE_CLASSIC
                } else {
                    MEMBER_TYPE_CONSUMER
                };
            }
            member
        })
        .collect();
    out
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let mut response = ConsumerGroupDescribeResponse::default();
    let image = node.metadata();
    for group_id in request.group_ids {
        let name = group_id.0.to_string();
        let outcome = if node.allowed(context, AclOperation::Describe, Resource::Group(&name)) {
            match node.groups.call(&name, ConsumerDescribe { group: name.clone() }).await {
                Ok(Some(group)) => Ok(group),
                Ok(None) => Err(BrokerError::Group(GroupError::GroupIdNotFound)),
                Err(error) => Err(error),
            }
        } else {
            Err(BrokerError::GroupAuthorizationFailed(name.clone()))
        };
        let mut group = match outcome {
            Ok(group) => described(group, &image, context.api_version),
            Err(error) => {
                let mut failed = DescribedGroup::default();
                failed.error_code = error_code(&error);
                let message = match &error {
                    BrokerError::Group(GroupError::GroupIdNotFound) => {
                        format!("Group {name} not found.")
                    }
                    other => other.to_string(),
                };
                failed.error_message = Some(StrBytes::from_string(message));
                failed
            }
        };
        group.group_id = group_id;
        if group.error_code == NONE {
            group.authorized_operations = node.authorized_operations(
                context,
                request.include_authorized_operations,
                authorization::GROUP_OPERATIONS,
                Resource::Group(&name),
            );
        }
        response.groups.push(group);
    }
    response
}
