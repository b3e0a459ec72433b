//! SyncGroup (key 14): the leader hands in every member's assignment; each member gets its own
//! once they are in (assignments are relayed byte for byte).

use super::group_route::call_coordinator;
use crate::error::code;
use crate::router::{GroupAnswer, GroupCall};
use crate::state::Shard;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 5);

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: SyncGroupRequest,
) -> SyncGroupResponse {
    let group = request.group_id.0.to_string();
    let call = GroupCall::Sync {
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
    match call_coordinator(shard, &group, call).await {
        Some(GroupAnswer::Sync(error_code, assignment, protocol_type, protocol)) => {
            response.error_code = error_code;
            response.assignment = assignment;
            if version >= 5 {
                response.protocol_type = Some(super::str_bytes(&protocol_type));
                response.protocol_name = Some(super::str_bytes(&protocol));
            }
        }
        _ => response.error_code = code::UNKNOWN_SERVER_ERROR,
    }
    response
}
