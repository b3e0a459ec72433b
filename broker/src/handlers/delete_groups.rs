//! DeleteGroups (key 42): deletes groups without members and their committed offsets
//! (NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND for unknown groups).

use super::offset_delete::delete_offsets;
use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut response = DeleteGroupsResponse::default();
    for group_id in request.groups_names {
        let name = group_id.0.to_string();
        let mut result = DeletableGroupResult::default();
        result.group_id = group_id;
        result.error_code = if !node.allowed(context, AclOperation::Delete, Resource::Group(&name))
        {
            error_code(&crate::error::BrokerError::GroupAuthorizationFailed(name))
        } else {
            match delete_offsets(node, &name, None).await {
                Ok(_) => NONE,
                Err(error) => error_code(&error),
            }
        };
        response.results.push(result);
    }
    response
}
