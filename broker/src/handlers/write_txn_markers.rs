//! WriteTxnMarkers (key 27), v1: a transaction coordinator on another broker asks this one to
//! write markers on the partitions it leads. Each (marker, partition) is written as an acks=all
//! append (`services::partitions::txn_markers`) and answered with its own code. Brokers are
//! not yet authenticated (issue #18: CLUSTER_ACTION); clients never send this request.

use super::error_fields;
use crate::authorization::{AclOperation, Resource};
use crate::error::NONE;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::partitions::txn_markers::MarkerSpec;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (1, 1);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let mut response = WriteTxnMarkersResponse::default();
    // As Kafka: only brokers (CLUSTER_ACTION on the cluster) write markers.
    let refused = !node.allowed(context, AclOperation::ClusterAction, Resource::Cluster);
    for marker in request.markers {
        let spec = MarkerSpec {
            producer_id: marker.producer_id.0,
            producer_epoch: marker.producer_epoch,
            commit: marker.transaction_result,
            coordinator_epoch: marker.coordinator_epoch,
        };
        let mut result = WritableTxnMarkerResult::default();
        result.producer_id = marker.producer_id;
        for topic in marker.topics {
            let mut topic_result = WritableTxnMarkerTopicResult::default();
            topic_result.name = topic.name.clone();
            for index in topic.partition_indexes {
                let partition = TopicPartition::new(topic.name.0.to_string(), index);
                let outcome = if refused {
                    Err(crate::error::BrokerError::ClusterAuthorizationFailed)
                } else {
                    node.partitions.write_marker_here(&partition, spec).await
                };
                let mut partition_result = WritableTxnMarkerPartitionResult::default();
                partition_result.partition_index = index;
                partition_result.error_code = match outcome {
                    Ok(()) => NONE,
                    Err(error) => {
                        tracing::debug!(%partition, %error, "a transaction marker was refused");
                        error_fields(&error).0
                    }
                };
                topic_result.partitions.push(partition_result);
            }
            result.topics.push(topic_result);
        }
        response.markers.push(result);
    }
    response
}
