//! ListGroups (key 16): groups known to this node with their state (groups with only
//! committed offsets are `Empty`); v4+ filters by state (KIP-518).

use crate::error::code;
use crate::router::{call, ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 4);

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    // Groups with members report their state; groups with only committed offsets are Empty.
    let mut groups: std::collections::BTreeMap<String, String> = Default::default();
    for target in 0..shard.count {
        if let ShardResponse::Groups(found) = call(shard, target, ShardRequest::ListGroups).await {
            for group in found {
                groups.entry(group).or_insert_with(|| "Empty".to_string());
            }
        }
        let states =
            call(shard, target, ShardRequest::Group(crate::router::GroupCall::States)).await;
        if let ShardResponse::Group(crate::router::GroupAnswer::States(found)) = states {
            for (group, state) in found {
                groups.insert(group, state);
            }
        }
    }
    let wanted = |group_state: &str| {
        version < 4
            || request.states_filter.is_empty()
            || request.states_filter.iter().any(|s| s.as_str().eq_ignore_ascii_case(group_state))
    };
    let mut response = ListGroupsResponse::default();
    response.error_code = code::NONE;
    response.groups = groups
        .into_iter()
        .filter(|(_, state)| wanted(state))
        .map(|(group, state)| {
            let mut listed = ListedGroup::default();
            listed.group_id = GroupId(super::str_bytes(&group));
            listed.protocol_type = super::str_bytes("consumer");
            if version >= 4 {
                listed.group_state = super::str_bytes(&state);
            }
            listed
        })
        .collect();
    response
}
