//! Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::requests::Heartbeat;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 4);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: HeartbeatRequest,
) -> HeartbeatResponse {
    if !node.allowed(context, AclOperation::Read, Resource::Group(&request.group_id.0)) {
        let mut response = HeartbeatResponse::default();
        let refused = BrokerError::GroupAuthorizationFailed(request.group_id.0.to_string());
        response.error_code = crate::error::error_code(&refused);
        return response;
    }
    let group = request.group_id.0.to_string();
    let call = Heartbeat {
        group: group.clone(),
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
        generation: request.generation_id,
    };
    let outcome = match node.groups.call(&group, call).await {
        Ok(result) => result,
        Err(BrokerError::Group(error)) => Err(error),
        Err(_) => Err(GroupError::CoordinatorNotAvailable),
    };
    let mut response = HeartbeatResponse::default();
    response.error_code = match outcome {
        Ok(()) => NONE,
        Err(error) => error_code(&BrokerError::Group(error)),
    };
    response
}
