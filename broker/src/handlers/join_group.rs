//! JoinGroup (key 11): a member (re)joins; the answer waits until the generation is formed.
//! v4+ first answers MEMBER_ID_REQUIRED with the member's id (KIP-394).

use super::group_route::call_coordinator;
use crate::error::code;
use crate::group::coordinator::JoinRequest;
use crate::router::{GroupAnswer, GroupCall};
use crate::state::Shard;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, RequestHeader};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 7);

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    header: &RequestHeader,
    request: JoinGroupRequest,
) -> JoinGroupResponse {
    let group = request.group_id.0.to_string();
    let join = JoinRequest {
        group: group.clone(),
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
        client_id: header.client_id.as_ref().map(|c| c.to_string()).unwrap_or_default(),
        client_host: String::new(),
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
    let mut response = JoinGroupResponse::default();
    match call_coordinator(shard, &group, GroupCall::Join(join)).await {
        Some(GroupAnswer::Join(outcome)) => {
            response.error_code = outcome.error_code;
            response.generation_id = outcome.generation;
            response.member_id = super::str_bytes(&outcome.member_id);
            response.leader = super::str_bytes(&outcome.leader);
            response.protocol_name = Some(super::str_bytes(&outcome.protocol));
            if version >= 7 {
                response.protocol_type = Some(super::str_bytes(&outcome.protocol_type));
            }
            response.members = outcome
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
            if outcome.error_code != code::NONE && version < 7 {
                response.protocol_name = Some(super::str_bytes(""));
            }
        }
        _ => response.error_code = code::UNKNOWN_SERVER_ERROR,
    }
    response
}
