//! DeleteShareGroupOffsets (key 92, KIP-932): deletes a share group's state on whole topics
//! (`kafka-share-groups.sh --delete-offsets`, `strata group delete-offsets` of a share group)
//! while the group has no members: each partition's state is deleted at its share coordinator
//! (DeleteShareGroupState), and a member that comes back starts from
//! `share.auto.offset.reset` again. Topics whose state is deleted leave the group's state
//! index. READ on the group is required (else
//! GROUP_AUTHORIZATION_FAILED for the request) and on each topic (else
//! TOPIC_AUTHORIZATION_FAILED for it); an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
//! References: KIP-932 ("DeleteShareGroupOffsets"); Kafka
//! `GroupCoordinatorService.deleteShareGroupOffsets`.

use super::share_group_offsets::{checked_group, coded, topic_of};
use crate::error::BrokerError;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::requests::ShareIndexRemove;
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let group = request.group_id.0.to_string();
    let mut response = DeleteShareGroupOffsetsResponse::default();
    let checked = checked_group(node, context, &group).await;
    if checked.is_err() {
        (response.error_code, response.error_message) = coded(&checked);
        return response;
    }
    let image = node.metadata();
    let mut deleted_topics = Vec::new();
    for topic in request.topics {
        let name = topic.topic_name.0.to_string();
        let (found, topic_id, allowed) = topic_of(node, context, &image, &name);
        let mut out = DeleteShareGroupOffsetsResponseTopic::default();
        out.topic_name = topic.topic_name.clone();
        out.topic_id = topic_id;
        let outcome = match found {
            _ if !allowed => Err(BrokerError::TopicAuthorizationFailed(name.clone())),
            None => Err(BrokerError::UnknownTopicOrPartition(name.clone())),
            Some(found) => {
                let mut deleted = Ok(());
                for index in 0..found.partition_count() {
                    let key = (group.clone(), found.topic_id, index);
                    if let Err(error) = node.share_state.delete(&key).await {
                        deleted = Err(error);
                        break;
                    }
                }
                if deleted.is_ok() {
                    deleted_topics.push(found.topic_id);
                }
                deleted
            }
        };
        (out.error_code, out.error_message) = coded(&outcome);
        response.responses.push(out);
    }
    if !deleted_topics.is_empty() {
        let remove = ShareIndexRemove { group: group.clone(), topics: deleted_topics };
        let unindexed: Result<(), BrokerError> = match node.groups.call(&group, remove).await {
            Ok(outcome) => outcome.map_err(BrokerError::Group),
            Err(error) => Err(error),
        };
        // The state is gone; an index left behind only names topics with nothing to delete.
        if let Err(error) = unindexed {
            tracing::warn!(%group, %error, "share group state deleted; its index was not updated");
        }
    }
    response
}
