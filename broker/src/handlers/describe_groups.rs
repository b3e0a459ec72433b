//! DescribeGroups (key 15): state, protocol and members (with their metadata and assignment)
//! of each group; a group with only committed offsets is `Empty`, an unknown one `Dead`.

use super::group_route::call_coordinator;
use crate::error::code;
use crate::router::{GroupAnswer, GroupCall};
use crate::state::Shard;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 5);

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut response = DescribeGroupsResponse::default();
    for group_id in request.groups {
        let name = group_id.0.to_string();
        let mut described = DescribedGroup::default();
        described.group_id = group_id;
        described.error_code = code::NONE;
        match call_coordinator(shard, &name, GroupCall::Describe { group: name.clone() }).await {
            Some(GroupAnswer::Described(Some((state, protocol_type, protocol, members)))) => {
                described.group_state = super::str_bytes(&state);
                described.protocol_type = super::str_bytes(&protocol_type);
                described.protocol_data = super::str_bytes(&protocol);
                described.members = members
                    .into_iter()
                    .map(|(id, instance, client_id, host, metadata, assignment)| {
                        let mut member = DescribedGroupMember::default();
                        member.member_id = super::str_bytes(&id);
                        if version >= 4 {
                            member.group_instance_id = instance.map(|i| super::str_bytes(&i));
                        }
                        member.client_id = super::str_bytes(&client_id);
                        member.client_host = super::str_bytes(&host);
                        member.member_metadata = metadata;
                        member.member_assignment = assignment;
                        member
                    })
                    .collect();
            }
            _ => {
                let has_offsets = super::offset_fetch_has_offsets(shard, &name).await;
                described.group_state =
                    super::str_bytes(if has_offsets { "Empty" } else { "Dead" });
                described.protocol_type =
                    super::str_bytes(if has_offsets { "consumer" } else { "" });
            }
        }
        response.groups.push(described);
    }
    response
}
