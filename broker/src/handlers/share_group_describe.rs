//! ShareGroupDescribe (key 77, KIP-932): a share group's state, epochs, assignor and members
//! with their assignments. A group that is not a share group (unknown, classic or consumer) is
//! GROUP_ID_NOT_FOUND, as in Kafka. DESCRIBE on the group is required.
//! References: KIP-932; Kafka `KafkaApis.handleShareGroupDescribe`.

use crate::authorization::{self, AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::metadata::image::MetadataImage;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::consumer::Partitions;
use crate::services::groups::requests::ShareDescribe;
use crate::services::groups::share::SIMPLE_ASSIGNOR;
use crate::services::groups::DescribedShareGroup;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (1, 1);

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

fn described(group: DescribedShareGroup, image: &MetadataImage) -> DescribedGroup {
    let mut out = DescribedGroup::default();
    out.group_state = StrBytes::from_static_str(group.state);
    out.group_epoch = group.epoch;
    out.assignment_epoch = group.assignment_epoch;
    out.assignor_name = StrBytes::from_static_str(SIMPLE_ASSIGNOR);
    out.members = group
        .members
        .into_iter()
        .map(|described| {
            let mut member = Member::default();
            member.member_id = StrBytes::from_string(described.member_id);
            member.rack_id = described.rack_id.map(StrBytes::from_string);
            member.member_epoch = described.epoch;
            member.client_id = StrBytes::from_string(described.client_id);
            member.client_host = StrBytes::from_string(described.client_host);
            member.subscribed_topic_names = described
                .subscribed
                .into_iter()
                .map(|name| TopicName(StrBytes::from_string(name)))
                .collect();
            member.assignment = assignment(&described.assignment, image);
            member
        })
        .collect();
    out
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    let mut response = ShareGroupDescribeResponse::default();
    let image = node.metadata();
    for group_id in request.group_ids {
        let name = group_id.0.to_string();
        let outcome = if node.allowed(context, AclOperation::Describe, Resource::Group(&name)) {
            match node.groups.call(&name, ShareDescribe { group: name.clone() }).await {
                Ok(Some(group)) => Ok(group),
                Ok(None) => Err(BrokerError::Group(GroupError::GroupIdNotFound)),
                Err(error) => Err(error),
            }
        } else {
            Err(BrokerError::GroupAuthorizationFailed(name.clone()))
        };
        let mut group = match outcome {
            Ok(group) => described(group, &image),
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
