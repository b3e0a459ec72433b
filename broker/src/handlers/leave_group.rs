//! LeaveGroup (key 13): members leave (v3+ several at once, KIP-345); the rest rebalance.

use super::group_route::call_coordinator;
use crate::error::code;
use crate::router::{GroupAnswer, GroupCall};
use crate::state::Shard;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 4);

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: LeaveGroupRequest,
) -> LeaveGroupResponse {
    let group = request.group_id.0.to_string();
    let member_ids: Vec<String> = if version >= 3 {
        request.members.iter().map(|m| m.member_id.to_string()).collect()
    } else {
        vec![request.member_id.to_string()]
    };
    let codes = match call_coordinator(
        shard,
        &group,
        GroupCall::Leave { group: group.clone(), member_ids: member_ids.clone() },
    )
    .await
    {
        Some(GroupAnswer::Codes(codes)) => codes,
        _ => member_ids.iter().map(|_| code::UNKNOWN_SERVER_ERROR).collect(),
    };
    let mut response = LeaveGroupResponse::default();
    if version >= 3 {
        response.error_code = code::NONE;
        response.members = member_ids
            .iter()
            .zip(&codes)
            .map(|(id, error_code)| {
                let mut member = MemberResponse::default();
                member.member_id = super::str_bytes(id);
                member.error_code = *error_code;
                member
            })
            .collect();
    } else {
        response.error_code = codes.first().copied().unwrap_or(code::NONE);
    }
    response
}
