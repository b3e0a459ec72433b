//! FindCoordinator (key 10): every group is coordinated by this node (its shard is chosen
//! internally from the group's `__consumer_offsets` partition). Transactional ids are answered
//! the same way; InitProducerId then refuses them (transactions are not implemented yet).
//! v4+ batches keys (KIP-699).

use super::str_bytes;
use crate::error::NONE;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 4);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let config = &node.config;
    let mut response = FindCoordinatorResponse::default();
    if context.api_version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let mut coordinator = Coordinator::default();
                coordinator.key = key.clone();
                coordinator.node_id = BrokerId(config.node_id);
                coordinator.host = str_bytes(&config.advertise_host);
                coordinator.port = config.advertise_port;
                coordinator.error_code = NONE;
                coordinator
            })
            .collect();
    } else {
        response.error_code = NONE;
        response.node_id = BrokerId(config.node_id);
        response.host = str_bytes(&config.advertise_host);
        response.port = config.advertise_port;
    }
    response
}
