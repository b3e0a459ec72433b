//! Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

use super::group_route::call_coordinator;
use crate::error::code;
use crate::router::{GroupAnswer, GroupCall};
use crate::state::Shard;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 4);

pub async fn handle(shard: &Rc<Shard>, request: HeartbeatRequest) -> HeartbeatResponse {
    let group = request.group_id.0.to_string();
    let call = GroupCall::Heartbeat {
        group: group.clone(),
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
        generation: request.generation_id,
    };
    let mut response = HeartbeatResponse::default();
    response.error_code = match call_coordinator(shard, &group, call).await {
        Some(GroupAnswer::Code(error_code)) => error_code,
        _ => code::UNKNOWN_SERVER_ERROR,
    };
    response
}
