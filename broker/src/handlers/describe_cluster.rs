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
    response.controller_id = BrokerId(node.config.node_id);
    let mut broker = DescribeClusterBroker::default();
    broker.broker_id = BrokerId(node.config.node_id);
    broker.host = str_bytes(&node.config.advertise_host);
    broker.port = node.config.advertise_port;
    broker.rack = node.config.cluster.rack.as_deref().map(str_bytes);
    response.brokers = vec![broker];
    response.cluster_authorized_operations = authorized(
        request.include_cluster_authorized_operations,
        authorization::CLUSTER_OPERATIONS,
    );
    response
}
