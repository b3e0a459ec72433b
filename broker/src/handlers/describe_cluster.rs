//! DescribeCluster (key 60, KIP-700): this node, the cluster id, and this node as controller.

use super::str_bytes;
use crate::error::code;
use crate::state::Shard;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 1);

pub fn handle(
    shard: &Rc<Shard>,
    version: i16,
    _request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    response.error_code = code::NONE;
    if version >= 1 {
        response.endpoint_type = 1;
    }
    response.cluster_id = str_bytes(&shard.snapshot().cluster_id);
    response.controller_id = BrokerId(shard.config.node_id);
    let mut broker = DescribeClusterBroker::default();
    broker.broker_id = BrokerId(shard.config.node_id);
    broker.host = str_bytes(&shard.config.advertise_host);
    broker.port = shard.config.advertise_port;
    response.brokers = vec![broker];
    response
}
