//! DescribeCluster (key 60, KIP-700): the live brokers (a single node: itself), the cluster
//! id, the active controller, and (when asked) the cluster operations the principal may
//! perform. v2 (KIP-1073) lists fenced brokers too when asked, marked `is_fenced`.

use super::str_bytes;
use crate::authorization::{self, AclOperation, Resource};
use crate::error::{BrokerError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    response.error_code = NONE;
    if !node.allowed(context, AclOperation::Describe, Resource::Cluster) {
        (response.error_code, response.error_message) =
            super::error_fields(&BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    if context.api_version >= 1 {
        response.endpoint_type = 1;
    }
    response.cluster_id = str_bytes(&node.metadata().cluster_id);
    response.controller_id = BrokerId(node.controller_id());
    response.brokers = node
        .brokers_on(&context.listener)
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
    if context.api_version >= 2 && request.include_fenced_brokers {
        let image = node.metadata();
        for broker in image.brokers.values().filter(|broker| broker.fenced) {
            let registration = &broker.registration;
            let mut fenced = DescribeClusterBroker::default();
            fenced.broker_id = BrokerId(registration.node.0);
            fenced.host = str_bytes(&registration.host);
            fenced.port = i32::from(registration.port);
            fenced.rack = registration.rack.as_deref().map(str_bytes);
            fenced.is_fenced = true;
            response.brokers.push(fenced);
        }
        response.brokers.sort_by_key(|broker| broker.broker_id.0);
    }
    response.cluster_authorized_operations = node.authorized_operations(
        context,
        request.include_cluster_authorized_operations,
        authorization::CLUSTER_OPERATIONS,
        Resource::Cluster,
    );
    response
}
