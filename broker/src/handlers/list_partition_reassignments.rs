//! ListPartitionReassignments (key 46, KIP-455): the running reassignments of the named
//! partitions (all partitions when `topics` is null), from this broker's metadata image, with
//! their full replica lists and the replicas being added and removed. Unknown partitions and
//! partitions not being moved are left out, as in Kafka.

use crate::authorization::{AclOperation, Resource};
use crate::error::NONE;
use crate::metadata::reassign;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !node.allowed(context, AclOperation::Describe, Resource::Cluster) {
        let mut response = ListPartitionReassignmentsResponse::default();
        response.error_code =
            crate::error::error_code(&crate::error::BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    let wanted: Option<Vec<(String, i32)>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .flat_map(|topic| {
                let name = topic.name.0.to_string();
                topic.partition_indexes.into_iter().map(move |index| (name.clone(), index))
            })
            .collect()
    });
    let image = node.metadata();
    let brokers = |ids: Vec<i32>| ids.into_iter().map(BrokerId).collect::<Vec<_>>();
    let mut response = ListPartitionReassignmentsResponse::default();
    response.error_code = NONE;
    for (topic, partition, replicas, adding, removing) in
        reassign::running(&image, wanted.as_deref())
    {
        let mut ongoing = OngoingPartitionReassignment::default();
        ongoing.partition_index = partition;
        ongoing.replicas = brokers(replicas);
        ongoing.adding_replicas = brokers(adding);
        ongoing.removing_replicas = brokers(removing);
        match response.topics.last_mut() {
            Some(last) if last.name.0.as_str() == topic => last.partitions.push(ongoing),
            _ => {
                let mut entry = OngoingTopicReassignment::default();
                entry.name = TopicName(super::str_bytes(&topic));
                entry.partitions.push(ongoing);
                response.topics.push(entry);
            }
        }
    }
    response
}
