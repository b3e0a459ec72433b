//! OffsetForLeaderEpoch (key 23, KIP-101 / KIP-320): for each partition, where the asked
//! leader epoch ends in the leader's log (the first offset of the next epoch, or the log end
//! for the latest), so a consumer (or, in #16, a follower) can tell whether the log it read
//! was truncated under it. Answered on the partition's owner shard from its
//! leader-epoch-checkpoint (`shard::checkpoint::end_offset_for`). The request's
//! `current_leader_epoch` is checked as Fetch checks it: older FENCED_LEADER_EPOCH, newer
//! UNKNOWN_LEADER_EPOCH; a broker that does not lead the partition answers
//! NOT_LEADER_OR_FOLLOWER.

use super::error_fields;
use crate::authorization::{AclOperation, Resource};
use crate::error::{BrokerError, Result, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::partitions::requests;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (2, 4);

async fn end_offset<S: Storage>(
    node: &Node<S>,
    partition: TopicPartition,
    current_leader_epoch: i32,
    requested: i32,
) -> Result<(i32, i64)> {
    node.check_leader_epoch(&partition, current_leader_epoch)?;
    let current = node
        .metadata()
        .placement(&partition)
        .map(|placement| placement.leader_epoch.0)
        .ok_or_else(|| BrokerError::UnknownTopicOrPartition(partition.to_string()))?;
    let request = requests::EpochEndOffset { partition: partition.clone(), requested, current };
    node.partitions.call(&partition, request).await?
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut response = OffsetForLeaderEpochResponse::default();
    // As Kafka: a follower (replica id >= 0) needs CLUSTER_ACTION, a client DESCRIBE on the topic.
    let follower = request.replica_id.0 >= 0;
    let cluster_refused =
        follower && !node.allowed(context, AclOperation::ClusterAction, Resource::Cluster);
    for topic in request.topics {
        let name = topic.topic.0.to_string();
        let refused = if cluster_refused {
            Some(crate::error::BrokerError::ClusterAuthorizationFailed)
        } else if !follower
            && !node.allowed(context, AclOperation::Describe, Resource::Topic(&name))
        {
            Some(crate::error::BrokerError::TopicAuthorizationFailed(name.clone()))
        } else {
            None
        };
        let mut result = OffsetForLeaderTopicResult::default();
        result.topic = topic.topic.clone();
        for partition in topic.partitions {
            let key = TopicPartition::new(name.clone(), partition.partition);
            let mut entry = EpochEndOffset::default();
            entry.partition = partition.partition;
            let outcome = match &refused {
                Some(crate::error::BrokerError::ClusterAuthorizationFailed) => {
                    Err(crate::error::BrokerError::ClusterAuthorizationFailed)
                }
                Some(_) => Err(crate::error::BrokerError::TopicAuthorizationFailed(name.clone())),
                None => {
                    end_offset(node, key, partition.current_leader_epoch, partition.leader_epoch)
                        .await
                }
            };
            match outcome {
                Ok((epoch, offset)) => {
                    entry.error_code = NONE;
                    entry.leader_epoch = epoch;
                    entry.end_offset = offset;
                }
                Err(error) => {
                    entry.error_code = error_fields(&error).0;
                    entry.leader_epoch = -1;
                    entry.end_offset = -1;
                }
            }
            result.partitions.push(entry);
        }
        response.topics.push(result);
    }
    response
}
