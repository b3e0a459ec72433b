//! DeleteGroups (key 42): deletes groups without members and their committed offsets
//! (NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND for unknown groups). A share
//! group's state is deleted first, on every share partition of its state index
//! (DeleteShareGroupState to each share coordinator), then its records, as Kafka deletes both;
//! a deletion that fails part way answers the error and keeps the group and its index, so
//! DeleteGroups can be sent again.

use super::offset_delete::delete_offsets;
use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::requests::ShareDescribe;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 2);

/// Deletes the state of a share group without members on every partition of its index
/// (nothing for a group of another kind, or a share group with members: the deletion itself
/// answers those).
async fn delete_share_state<S: Storage>(node: &Node<S>, group: &str) -> Result<(), BrokerError> {
    let described = node.groups.call(group, ShareDescribe { group: group.to_string() }).await?;
    let Some(described) = described.filter(|d| d.members.is_empty()) else { return Ok(()) };
    for (topic_id, topic) in &described.state_index {
        for partition in &topic.partitions {
            let key = (group.to_string(), *topic_id, *partition);
            node.share_state.delete(&key).await.map_err(|error| {
                tracing::warn!(%group, topic = %topic.name, partition, %error, "deleting a share group's state failed");
                BrokerError::Group(GroupError::CoordinatorNotAvailable)
            })?;
        }
    }
    Ok(())
}

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
            let deleted = match delete_share_state(node, &name).await {
                Ok(()) => delete_offsets(node, &name, None).await.map(|_| ()),
                Err(error) => Err(error),
            };
            match deleted {
                Ok(_) => NONE,
                Err(error) => error_code(&error),
            }
        };
        response.results.push(result);
    }
    response
}
