//! DescribeGroups (key 15): state, protocol and members (with their metadata and assignment)
//! of each group; a group with only committed offsets is `Empty`, an unknown one `Dead`, and a
//! KIP-848 consumer group too (v6+: GROUP_ID_NOT_FOUND with a message, as Kafka: DescribeGroups
//! describes classic groups; ConsumerGroupDescribe the others).

use crate::authorization::{self, AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::{requests::Describe, Described};
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 6);

async fn describe<S: Storage>(node: &Node<S>, group: &str) -> Result<Described, BrokerError> {
    node.groups.call(group, Describe { group: group.to_string() }).await
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut response = DescribeGroupsResponse::default();
    for group_id in request.groups {
        let name = group_id.0.to_string();
        let mut described = DescribedGroup::default();
        described.group_id = group_id;
        let outcome = if node.allowed(context, AclOperation::Describe, Resource::Group(&name)) {
            describe(node, &name).await
        } else {
            Err(BrokerError::GroupAuthorizationFailed(name.clone()))
        };
        match outcome {
            // v6 (KIP-1043): a group of another type is not found, with a message.
            Ok(group) if group.consumer_group && context.api_version >= 6 => {
                described.error_code = error_code(&BrokerError::Group(GroupError::GroupIdNotFound));
                described.error_message =
                    Some(super::str_bytes(&format!("Group {name} is not a classic group.")));
            }
            Ok(group) if group.state == "Dead" && context.api_version >= 6 => {
                described.error_code = error_code(&BrokerError::Group(GroupError::GroupIdNotFound));
                described.error_message =
                    Some(super::str_bytes(&format!("Group {name} not found.")));
            }
            Ok(group) => {
                described.error_code = NONE;
                described.group_state = super::str_bytes(group.state);
                described.protocol_type = super::str_bytes(&group.protocol_type);
                described.protocol_data = super::str_bytes(&group.protocol);
                described.members = group
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut member = DescribedGroupMember::default();
                        member.member_id = super::str_bytes(&m.member_id);
                        if context.api_version >= 4 {
                            member.group_instance_id = m.instance_id.map(|i| super::str_bytes(&i));
                        }
                        member.client_id = super::str_bytes(&m.client_id);
                        member.client_host = super::str_bytes(&m.client_host);
                        member.member_metadata = m.metadata;
                        member.member_assignment = m.assignment;
                        member
                    })
                    .collect();
            }
            Err(error) => {
                described.error_code = error_code(&error);
                if context.api_version >= 6 {
                    described.error_message = Some(super::str_bytes(&error.to_string()));
                }
            }
        }
        if context.api_version >= 3 {
            described.authorized_operations = node.authorized_operations(
                context,
                request.include_authorized_operations,
                authorization::GROUP_OPERATIONS,
                Resource::Group(&name),
            );
        }
        response.groups.push(described);
    }
    response
}
