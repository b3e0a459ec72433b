//! DescribeCluster (key 60, KIP-700): this node, the cluster id, this node as controller, and
//! (when asked) the cluster operations the principal may perform.

use super::str_bytes;
use crate::authorization::{self, authorized};
use crate::error::NONE;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 1);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    response.error_code = NONE;
    if context.api_version >= 1 {
        response.endpoint_type = 1;
    }
    response.cluster_id = str_bytes(&node.metadata().cluster_id);
    response.controller_id = BrokerId(node.controller_id());
    response.brokers = node
        .brokers()
        .into_iter()
        .map(|endpoint| {
            let mut broker = DescribeClusterBroker::default();
            broker.broker_id = BrokerId(endpoint.node.0);
            broker.host = str_bytes(&endpoint.host);
            broker.port = endpoint.port;
            broker.rack = endpoint.rack.as_deref().map(str_bytes);
            broker
        })
        .collect();
    response.cluster_authorized_operations = authorized(
        request.include_cluster_authorized_operations,
        authorization::CLUSTER_OPERATIONS,
    );
    response
}
