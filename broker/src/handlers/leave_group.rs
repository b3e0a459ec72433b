//! LeaveGroup (key 13): members leave (v3+ several at once, each named by member id and/or
//! group instance id, KIP-345); the rest rebalance. v3+ answers echo each identity.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::requests::Leave;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 4);

fn code(answer: &Result<(), GroupError>) -> i16 {
    match answer {
        Ok(()) => NONE,
        Err(error) => error_code(&BrokerError::Group(error.clone())),
    }
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: LeaveGroupRequest,
) -> LeaveGroupResponse {
    let version = context.api_version;
    let group = request.group_id.0.to_string();
    if !node.allowed(context, AclOperation::Read, Resource::Group(&group)) {
        let mut response = LeaveGroupResponse::default();
        response.error_code =
            crate::error::error_code(&BrokerError::GroupAuthorizationFailed(group));
        return response;
    }
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|i| i.to_string())))
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    let call = Leave { group: group.clone(), members: members.clone() };
    let answers: Vec<Result<(), GroupError>> = match node.groups.call(&group, call).await {
        Ok(answers) => answers,
        Err(_) => members.iter().map(|_| Err(GroupError::CoordinatorNotAvailable)).collect(),
    };
    let mut response = LeaveGroupResponse::default();
    if version >= 3 {
        response.error_code = NONE;
        response.members = members
            .iter()
            .zip(&answers)
            .map(|((id, instance), answer)| {
                let mut member = MemberResponse::default();
                member.member_id = super::str_bytes(id);
                member.group_instance_id = instance.as_deref().map(super::str_bytes);
                member.error_code = code(answer);
                member
            })
            .collect();
    } else {
        response.error_code = answers.first().map(code).unwrap_or(NONE);
    }
    response
}
