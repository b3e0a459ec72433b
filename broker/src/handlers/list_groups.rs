//! ListGroups (key 16): groups known to this node. Until membership lands every group is
//! `Empty` (it has committed offsets and no members); v4+ filters by state (KIP-518).

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
    let mut groups = Vec::new();
    for target in 0..shard.count {
        if let ShardResponse::Groups(found) = call(shard, target, ShardRequest::ListGroups).await {
            groups.extend(found);
        }
    }
    groups.sort();
    let state = "Empty";
    let wanted = |group_state: &str| {
        version < 4
            || request.states_filter.is_empty()
            || request.states_filter.iter().any(|s| s.as_str().eq_ignore_ascii_case(group_state))
    };
    let mut response = ListGroupsResponse::default();
    response.error_code = code::NONE;
    response.groups = groups
        .into_iter()
        .filter(|_| wanted(state))
        .map(|group| {
            let mut listed = ListedGroup::default();
            listed.group_id = GroupId(super::str_bytes(&group));
            listed.protocol_type = super::str_bytes("consumer");
            if version >= 4 {
                listed.group_state = super::str_bytes(state);
            }
            listed
        })
        .collect();
    response
}
