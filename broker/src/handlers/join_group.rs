//! JoinGroup (key 11): a member (re)joins; the answer waits until the generation is formed.
//! v4+ first answers MEMBER_ID_REQUIRED with the member's id (KIP-394). The member's client
//! host (DescribeGroups shows it) is the connection's address, as Kafka reports it.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::{JoinOutcome, JoinRequest};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 7);

async fn join<S: Storage>(node: &Node<S>, request: JoinRequest) -> JoinOutcome {
    let member_id = request.member_id.clone();
    let group = request.group.clone();
    match node.groups.call(&group, request).await {
        Ok(outcome) => outcome,
        Err(BrokerError::Group(error)) => JoinOutcome { member_id, result: Err(error) },
        Err(_) => JoinOutcome { member_id, result: Err(GroupError::CoordinatorNotAvailable) },
    }
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: JoinGroupRequest,
) -> JoinGroupResponse {
    if !node.allowed(context, AclOperation::Read, Resource::Group(&request.group_id.0)) {
        let mut response = JoinGroupResponse::default();
        let refused = BrokerError::GroupAuthorizationFailed(request.group_id.0.to_string());
        response.error_code = crate::error::error_code(&refused);
        return response;
    }
    let version = context.api_version;
    let join_request = JoinRequest {
        group: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
        client_id: context.client_id().to_string(),
        client_host: context.client_host(),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        version,
    };
    let outcome = join(node, join_request).await;
    let mut response = JoinGroupResponse::default();
    response.member_id = super::str_bytes(&outcome.member_id);
    match outcome.result {
        Ok(joined) => {
            response.error_code = NONE;
            response.generation_id = joined.generation;
            response.leader = super::str_bytes(&joined.leader);
            response.protocol_name = Some(super::str_bytes(&joined.protocol));
            if version >= 7 {
                response.protocol_type = Some(super::str_bytes(&joined.protocol_type));
            }
            response.members = joined
                .members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    let mut member = JoinGroupResponseMember::default();
                    member.member_id = super::str_bytes(&id);
                    if version >= 5 {
                        member.group_instance_id = instance.map(|i| super::str_bytes(&i));
                    }
                    member.metadata = metadata;
                    member
                })
                .collect();
        }
        Err(error) => {
            response.error_code = error_code(&BrokerError::Group(error));
            response.generation_id = -1;
            response.protocol_name = Some(super::str_bytes(""));
            if version >= 7 {
                response.protocol_type = Some(super::str_bytes(""));
            }
        }
    }
    response
}
