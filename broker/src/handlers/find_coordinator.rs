//! FindCoordinator (key 10): every group and transactional id is coordinated by this node (its
//! shard is chosen internally from the group's `__consumer_offsets` partition). v4+ batches keys
//! (KIP-699).

use super::str_bytes;
use crate::error::code;
use crate::state::Shard;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 4);

pub fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let config = &shard.config;
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let mut coordinator = Coordinator::default();
                coordinator.key = key.clone();
                coordinator.node_id = BrokerId(config.node_id);
                coordinator.host = str_bytes(&config.advertise_host);
                coordinator.port = config.advertise_port;
                coordinator.error_code = code::NONE;
                coordinator
            })
            .collect();
    } else {
        response.error_code = code::NONE;
        response.node_id = BrokerId(config.node_id);
        response.host = str_bytes(&config.advertise_host);
        response.port = config.advertise_port;
    }
    response
}
