//! What AlterShareGroupOffsets and DeleteShareGroupOffsets share: both change a share group's
//! start offsets only while the group has no members (else NON_EMPTY_GROUP), as Kafka's tools
//! require, and both answer per topic or partition with the error a `BrokerError` maps to.
//! The share-partition leaders learn of the change through the state epoch: their writes of
//! the old state are refused (FENCED_STATE_EPOCH), and a new share session checks it
//! (`services::shares`), so the next member starts from the new state.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError};
use crate::metadata::image::{MetadataImage, TopicImage};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::requests::{Describe, ShareDescribe};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;

/// READ on `group` (else GROUP_AUTHORIZATION_FAILED), then `check_empty_share_group`.
pub(super) async fn checked_group<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    group: &str,
) -> Result<(), BrokerError> {
    if !node.allowed(context, AclOperation::Read, Resource::Group(group)) {
        return Err(BrokerError::GroupAuthorizationFailed(group.to_string()));
    }
    check_empty_share_group(node, group).await
}

/// A topic of the request: its image (None: unknown), its id as the response carries it (nil
/// when unknown), and whether the principal may READ it.
pub(super) fn topic_of<'a, S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    image: &'a MetadataImage,
    name: &str,
) -> (Option<&'a TopicImage>, uuid::Uuid, bool) {
    let found = image.topic(name);
    let id = found.map_or(uuid::Uuid::nil(), |t| uuid::Uuid::from_bytes(t.topic_id));
    (found, id, node.allowed(context, AclOperation::Read, Resource::Topic(name)))
}

/// Ok when `group` is a share group with no members, or no group at all (share membership is
/// in memory, so a share group whose coordinator moved is not known until a member comes
/// back). A classic or consumer group is GROUP_ID_NOT_FOUND, as Kafka answers a group of
/// another type.
async fn check_empty_share_group<S: Storage>(
    node: &Node<S>,
    group: &str,
) -> Result<(), BrokerError> {
    match node.groups.call(group, ShareDescribe { group: group.to_string() }).await? {
        Some(share) if !share.members.is_empty() => {
            Err(BrokerError::Group(GroupError::NonEmptyGroup))
        }
        Some(_) => Ok(()),
        None => {
            let described = node.groups.call(group, Describe { group: group.to_string() }).await?;
            if described.state != "Dead" || described.consumer_group {
                return Err(BrokerError::Group(GroupError::GroupIdNotFound));
            }
            Ok(())
        }
    }
}

/// (ErrorCode, ErrorMessage) of an outcome, as a response carries them.
pub(super) fn coded(outcome: &Result<(), BrokerError>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err(error) => (error_code(error), Some(StrBytes::from_string(error.to_string()))),
    }
}
