//! ListGroups (key 16): groups this node coordinates (asked of every shard) with their state
//! (groups with only committed offsets are `Empty`); v4+ filters by state (KIP-518), v5+ by type
//! (KIP-848: `classic` or `consumer`; a filter naming only other or unknown types lists none),
//! both case-insensitively.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::{requests::List, ListedGroup as Listed};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use shard::io::Storage;
use std::collections::BTreeMap;

pub const VERSIONS: (i16, i16) = (0, 5);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    let mut response = ListGroupsResponse::default();
    response.error_code = NONE;
    let mut groups: BTreeMap<String, Listed> = BTreeMap::new();
    for answer in node.groups.call_all(|| List).await {
        match answer {
            Ok(found) => {
                groups.extend(found.into_iter().map(|listed| (listed.group.clone(), listed)))
            }
            Err(error) => response.error_code = error_code(&error),
        }
    }
    let wanted = |group: &Listed| {
        let state = context.api_version < 4
            || request.states_filter.is_empty()
            || request.states_filter.iter().any(|s| s.as_str().eq_ignore_ascii_case(group.state));
        let kind = context.api_version < 5
            || request.types_filter.is_empty()
            || request
                .types_filter
                .iter()
                .any(|t| t.as_str().eq_ignore_ascii_case(group.group_type));
        state && kind
    };
    // As Kafka: every group with DESCRIBE on the cluster, else those the principal may describe.
    let all = node.allowed(context, AclOperation::Describe, Resource::Cluster);
    response.groups = groups
        .into_values()
        .filter(|group| wanted(group))
        .filter(|group| {
            all || node.allowed(context, AclOperation::Describe, Resource::Group(&group.group))
        })
        .map(|group| {
            let mut listed = ListedGroup::default();
            listed.group_id = GroupId(super::str_bytes(&group.group));
            listed.protocol_type = super::str_bytes(&group.protocol_type);
            if context.api_version >= 4 {
                listed.group_state = super::str_bytes(group.state);
            }
            if context.api_version >= 5 {
                listed.group_type = super::str_bytes(group.group_type);
            }
            listed
        })
        .collect();
    response
}
