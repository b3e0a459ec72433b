//! CreatePartitions (key 37): raises a topic's partition count (never lowers it), with or
//! without a manual replica assignment for the new partitions (checked as Kafka checks it:
//! one per new partition, of registered brokers, as many replicas as the topic has).

use super::nth_result;
use crate::authorization::{AclOperation, Resource};
use crate::error::BrokerError;
use crate::metadata::decide::{validate_assignments, MetadataChange};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 3);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let image = node.metadata();
    let mut early = Vec::new();
    let mut changes: Vec<(String, i32, bool, Vec<Vec<i32>>)> = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let duplicate = request.topics.iter().filter(|other| other.name == topic.name).count() > 1;
        let checked = match (&topic.assignments, image.topic(&name)) {
            _ if duplicate => Err(BrokerError::InvalidRequest("Duplicate topic name.".into())),
            _ if !node.allowed(context, AclOperation::Alter, Resource::Topic(&name)) => {
                Err(BrokerError::TopicAuthorizationFailed(name.clone()))
            }
            (Some(assignments), Some(existing)) => {
                let added = topic.count - existing.partition_count();
                if added > 0 && assignments.len() as i32 != added {
                    Err(BrokerError::InvalidReplicaAssignment(format!(
                        "Attempted to add {added} additional partition(s), but only {} \
                         assignment(s) were specified.",
                        assignments.len()
                    )))
                } else {
                    let assignments: Vec<(i32, Vec<i32>)> = assignments
                        .iter()
                        .enumerate()
                        .map(|(i, a)| (i as i32, a.broker_ids.iter().map(|id| id.0).collect()))
                        .collect();
                    // The topic's replication factor, on the brokers registered.
                    let factor = existing.partitions.first().map_or(1, |p| p.replicas.len());
                    let registered = super::create_topics::registered_ids(node);
                    validate_assignments(&assignments, &registered, Some(factor))
                }
            }
            _ => Ok(()),
        };
        match checked {
            Ok(()) => {
                early.push(None);
                let assignments = topic
                    .assignments
                    .iter()
                    .flatten()
                    .map(|a| a.broker_ids.iter().map(|id| id.0).collect())
                    .collect();
                changes.push((name, topic.count, request.validate_only, assignments));
            }
            Err(error) => early.push(Some(error)),
        }
    }
    let results = if changes.is_empty() {
        Vec::new()
    } else {
        node.metadata_router.change(MetadataChange::CreatePartitions(changes)).await
    };
    let mut response = CreatePartitionsResponse::default();
    let mut next = 0;
    for (topic, early_error) in request.topics.iter().zip(early) {
        let mut result = CreatePartitionsTopicResult::default();
        result.name = topic.name.clone();
        let (error_code, message) = match early_error {
            Some(error) => super::error_fields(&error),
            None => {
                next += 1;
                nth_result(&results, next - 1)
            }
        };
        result.error_code = error_code;
        result.error_message = message;
        response.results.push(result);
    }
    response
}
