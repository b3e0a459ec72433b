//! AlterPartitionReassignments (key 45, KIP-455): moves partitions' replicas to target sets,
//! or with a null target cancels a running move. Decided through the metadata service
//! (`metadata::reassign`), so through the controller quorum in a cluster; the move itself
//! runs afterwards (new replicas catch up, join the ISR, then the controller finishes it).
//! Per partition: INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
//! UNKNOWN_TOPIC_OR_PARTITION, and in v1 (KIP-860) INVALID_REPLICATION_FACTOR when the target
//! changes the replica count and `allow_replication_factor_change` is false.

use super::{error_fields, nth_result};
use crate::authorization::{AclOperation, Resource};
use crate::error::{BrokerError, Result, NONE};
use crate::metadata::decide::MetadataChange;
use crate::metadata::MetadataImage;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 1);

/// A requested partition: topic, partition and the error found here (else it is decided).
type Asked = (String, i32, Option<BrokerError>);
/// A move to decide: topic, partition and target replicas (`None` cancels).
type Change = (String, i32, Option<Vec<i32>>);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    if !node.allowed(context, AclOperation::Alter, Resource::Cluster) {
        let mut response = AlterPartitionReassignmentsResponse::default();
        response.error_code =
            crate::error::error_code(&crate::error::BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    let allow_factor_change = context.api_version < 1 || request.allow_replication_factor_change;
    let (asked, changes) = validate(&node.metadata(), &request, allow_factor_change);
    let results = if changes.is_empty() {
        Vec::new()
    } else {
        node.metadata_router.change(MetadataChange::Reassign(changes)).await
    };
    let mut response = AlterPartitionReassignmentsResponse::default();
    response.error_code = NONE;
    if context.api_version >= 1 {
        response.allow_replication_factor_change = request.allow_replication_factor_change;
    }
    answer(&mut response, asked, &results);
    response
}

/// Per requested partition the error found here, and the moves left to decide.
fn validate(
    image: &MetadataImage,
    request: &AlterPartitionReassignmentsRequest,
    allow_factor_change: bool,
) -> (Vec<Asked>, Vec<Change>) {
    // (topic, partition, target) to decide, and per requested partition the error found here.
    let mut asked: Vec<Asked> = Vec::new();
    let mut changes = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        for partition in &topic.partitions {
            let target: Option<Vec<i32>> = partition
                .replicas
                .as_ref()
                .map(|replicas| replicas.iter().map(|broker| broker.0).collect());
            let current = image
                .topic(&name)
                .and_then(|t| t.placement(partition.partition_index))
                .map(|placement| placement.replicas.len().saturating_sub(placement.adding.len()));
            let refused = match (&target, current) {
                (Some(target), Some(current))
                    if !allow_factor_change && target.len() != current =>
                {
                    Some(BrokerError::InvalidReplicationFactor(format!(
                        "{name}-{}: {} replicas now, {} in the target, and the request does \
                         not allow the replication factor to change",
                        partition.partition_index,
                        current,
                        target.len()
                    )))
                }
                _ => None,
            };
            if refused.is_none() {
                changes.push((name.clone(), partition.partition_index, target));
            }
            asked.push((name.clone(), partition.partition_index, refused));
        }
    }
    (asked, changes)
}

/// Each requested partition's answer, grouped by topic in request order.
fn answer(
    response: &mut AlterPartitionReassignmentsResponse,
    asked: Vec<Asked>,
    results: &[Result<()>],
) {
    let mut decided = 0;
    for (name, partition, refused) in asked {
        let (code, message) = match refused {
            Some(error) => error_fields(&error),
            None => {
                decided += 1;
                nth_result(results, decided - 1)
            }
        };
        let mut result = ReassignablePartitionResponse::default();
        result.partition_index = partition;
        result.error_code = code;
        result.error_message = message;
        match response.responses.last_mut() {
            Some(topic) if topic.name.0.as_str() == name => topic.partitions.push(result),
            _ => {
                let mut topic = ReassignableTopicResponse::default();
                topic.name = kafka_protocol::messages::TopicName(super::str_bytes(&name));
                topic.partitions.push(result);
                response.responses.push(topic);
            }
        }
    }
}
