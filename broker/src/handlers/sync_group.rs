//! SyncGroup (key 14): the leader hands in every member's assignment; each member gets its own
//! once they are in (assignments are relayed byte for byte).

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::{requests::Sync, Assignment};
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 5);

async fn sync<S: Storage>(
    node: &Node<S>,
    group: &str,
    request: Sync,
) -> Result<Assignment, GroupError> {
    match node.groups.call(group, request).await {
        Ok(result) => result,
        Err(BrokerError::Group(error)) => Err(error),
        Err(_) => Err(GroupError::CoordinatorNotAvailable),
    }
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: SyncGroupRequest,
) -> SyncGroupResponse {
    if !node.allowed(context, AclOperation::Read, Resource::Group(&request.group_id.0)) {
        let mut response = SyncGroupResponse::default();
        let refused = BrokerError::GroupAuthorizationFailed(request.group_id.0.to_string());
        response.error_code = crate::error::error_code(&refused);
        return response;
    }
    let group = request.group_id.0.to_string();
    let call = Sync {
        group: group.clone(),
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
        generation: request.generation_id,
        assignments: request
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    let mut response = SyncGroupResponse::default();
    match sync(node, &group, call).await {
        Ok(assigned) => {
            response.error_code = NONE;
            response.assignment = assigned.assignment;
            if context.api_version >= 5 {
                response.protocol_type = Some(super::str_bytes(&assigned.protocol_type));
                response.protocol_name = Some(super::str_bytes(&assigned.protocol));
            }
        }
        Err(error) => {
            response.error_code = error_code(&BrokerError::Group(error));
            if context.api_version >= 5 {
                response.protocol_type = Some(super::str_bytes(""));
                response.protocol_name = Some(super::str_bytes(""));
            }
        }
    }
    response
}
