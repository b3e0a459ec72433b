//! ElectLeaders (key 43, KIP-183 / KIP-460): a preferred election (back to each partition's
//! first replica, when it is a live in-sync replica) or an unclean one (a leader for a
//! leaderless partition, from the ISR or else any live replica), decided through the metadata
//! service (`metadata::elect`) and so through the controller quorum in a cluster. Per
//! partition: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
//! ELIGIBLE_LEADERS_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION. With no partitions named
//! (null), every partition is tried and, as Kafka answers, only those not answered
//! ELECTION_NOT_NEEDED are listed. v0 has no election type (preferred).

use super::nth_result;
use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, NONE};
use crate::metadata::decide::MetadataChange;
use crate::metadata::elect::ElectionType;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use shard::io::Storage;
use std::collections::BTreeMap;

pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ElectLeadersRequest,
) -> ElectLeadersResponse {
    if !node.allowed(context, AclOperation::Alter, Resource::Cluster) {
        let mut response = ElectLeadersResponse::default();
        response.error_code =
            crate::error::error_code(&crate::error::BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    let mut response = ElectLeadersResponse::default();
    let kind = match (context.api_version, request.election_type) {
        (0, _) | (_, 0) => Some(ElectionType::Preferred),
        (_, 1) => Some(ElectionType::Unclean),
        _ => None,
    };
    let Some(kind) = kind else {
        let error =
            BrokerError::InvalidRequest(format!("unknown election type {}", request.election_type));
        response.error_code = error_code(&error);
        return response;
    };
    response.error_code = NONE;
    let every = request.topic_partitions.is_none();
    let partitions: Vec<(String, i32)> = match request.topic_partitions {
        Some(topics) => topics
            .into_iter()
            .flat_map(|topic| {
                let name = topic.topic.0.to_string();
                topic.partitions.into_iter().map(move |partition| (name.clone(), partition))
            })
            .collect(),
        None => {
            let image = node.metadata();
            image
                .topics
                .values()
                .flat_map(|topic| {
                    (0..topic.partition_count()).map(move |index| (topic.name.clone(), index))
                })
                .collect()
        }
    };
    let results = if partitions.is_empty() {
        Vec::new()
    } else {
        node.metadata_router.change(MetadataChange::ElectLeaders(kind, partitions.clone())).await
    };
    let not_needed = error_code(&BrokerError::ElectionNotNeeded(String::new()));
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for (index, (topic, partition)) in partitions.into_iter().enumerate() {
        let (code, message) = nth_result(&results, index);
        if every && code == not_needed {
            continue;
        }
        let mut result = PartitionResult::default();
        result.partition_id = partition;
        result.error_code = code;
        result.error_message = message;
        by_topic.entry(topic).or_default().push(result);
    }
    response.replica_election_results = by_topic
        .into_iter()
        .map(|(topic, partition_result)| {
            let mut result = ReplicaElectionResult::default();
            result.topic = TopicName(super::str_bytes(&topic));
            result.partition_result = partition_result;
            result
        })
        .collect();
    response
}
