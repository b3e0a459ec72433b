//! AlterShareGroupOffsets (key 91, KIP-932): sets a share group's share-partition start
//! offsets (`kafka-share-groups.sh --reset-offsets`, `strata group reset-offsets` of a share
//! group) while the group has no members. Each partition's state starts over at the given
//! offset, with no record in flight, at a newer state epoch (InitializeShareGroupState to its
//! share coordinator), so the leader's old state is fenced. READ on the group is required
//! (else GROUP_AUTHORIZATION_FAILED for the request) and on each topic (else
//! TOPIC_AUTHORIZATION_FAILED for its partitions); an unknown topic or partition is
//! UNKNOWN_TOPIC_OR_PARTITION and a negative offset INVALID_REQUEST. The partitions are added
//! to the group's state index (its coordinator's `__consumer_offsets` record) before their
//! state is written, so DeleteGroups finds every state a reset made.
//! References: KIP-932 ("AlterShareGroupOffsets"); Kafka
//! `GroupCoordinatorService.alterShareGroupOffsets`.

use super::share_group_offsets::{checked_group, coded, topic_of};
use crate::error::{BrokerError, GroupError};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::requests::ShareIndexAdd;
use crate::services::groups::share_records::StateIndex;
use crate::services::shares::state::Persisted;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 0);

/// The state epoch a reset of a partition with no state starts at: seconds since the Unix
/// epoch, so it differs from the epoch of any state a leader may still hold in memory from
/// before the state was deleted (a leader starts states at 0, and resets add 1).
fn fresh_state_epoch(now_ms: i64) -> i32 {
    i32::try_from(now_ms / 1000).unwrap_or(i32::MAX)
}

/// One partition's new start: the state read (for its epoch), then a newer one written.
async fn reset<S: Storage>(
    node: &Node<S>,
    key: &(String, [u8; 16], i32),
    start_offset: i64,
) -> Result<(), BrokerError> {
    if start_offset < 0 {
        return Err(BrokerError::InvalidRequest(format!("start offset {start_offset}")));
    }
    let current = node.share_state.read(key, -1).await?;
    let state_epoch = match current {
        Some(stored) => stored.state_epoch.saturating_add(1),
        None => fresh_state_epoch(node.clock.now_ms()),
    };
    let state = Persisted { start_offset, batches: Vec::new() };
    node.share_state.write(key, -1, state_epoch, state, true).await
}

/// Adds every existing partition the request names to the group's state index.
async fn index<S: Storage>(
    node: &Node<S>,
    group: &str,
    image: &crate::metadata::image::MetadataImage,
    request: &AlterShareGroupOffsetsRequest,
) -> Result<(), GroupError> {
    let mut partitions = StateIndex::new();
    for topic in &request.topics {
        let Some(found) = image.topic(&topic.topic_name.0) else { continue };
        let entry = partitions.entry(found.topic_id).or_default();
        entry.name = topic.topic_name.0.to_string();
        let count = found.partition_count();
        entry.partitions.extend(
            topic.partitions.iter().map(|p| p.partition_index).filter(|p| (0..count).contains(p)),
        );
    }
    let add = ShareIndexAdd { group: group.to_string(), partitions };
    // Not reaching the coordinator is answered as Kafka answers its absence.
    node.groups.call(group, add).await.unwrap_or(Err(GroupError::CoordinatorNotAvailable))
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let group = request.group_id.0.to_string();
    let mut response = AlterShareGroupOffsetsResponse::default();
    let checked = checked_group(node, context, &group).await;
    if checked.is_err() {
        (response.error_code, response.error_message) = coded(&checked);
        return response;
    }
    let image = node.metadata();
    let indexed = index(node, &group, &image, &request).await;
    for topic in request.topics {
        let name = topic.topic_name.0.to_string();
        let (found, topic_id, allowed) = topic_of(node, context, &image, &name);
        let mut out = AlterShareGroupOffsetsResponseTopic::default();
        out.topic_name = topic.topic_name.clone();
        out.topic_id = topic_id;
        for partition in topic.partitions {
            let index = partition.partition_index;
            let outcome = match found {
                _ if !allowed => Err(BrokerError::TopicAuthorizationFailed(name.clone())),
                Some(found) if (0..found.partition_count()).contains(&index) => {
                    let key = (group.clone(), found.topic_id, index);
                    match &indexed {
                        Ok(()) => reset(node, &key, partition.start_offset).await,
                        Err(error) => Err(BrokerError::Group(error.clone())),
                    }
                }
                _ => Err(BrokerError::UnknownTopicOrPartition(format!("{name}-{index}"))),
            };
            let mut answer = AlterShareGroupOffsetsResponsePartition::default();
            answer.partition_index = index;
            (answer.error_code, answer.error_message) = coded(&outcome);
            out.partitions.push(answer);
        }
        response.responses.push(out);
    }
    response
}
