//! InitProducerId (key 22): a producer id and epoch for an idempotent producer (KIP-98), or the
//! same id with a bumped epoch for one that asks with its current id and epoch (KIP-360).
//! Allocation runs on shard 0 (`services::producer_ids`). Transactions are not implemented
//! yet: a request with a transactional id is refused with INVALID_REQUEST (clients treat it as
//! fatal instead of retrying forever).

use crate::error::{error_code, BrokerError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 5);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    _context: &RequestContext,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if request.transactional_id.is_some() {
        tracing::debug!("InitProducerId with a transactional id refused: no transactions yet");
        let refused = BrokerError::InvalidRequest("transactions are not supported yet".into());
        response.error_code = error_code(&refused);
        return response;
    }
    match node.init_producer_id(request.producer_id.0, request.producer_epoch).await {
        Ok((producer_id, epoch)) => {
            response.error_code = NONE;
            response.producer_id = ProducerId(producer_id);
            response.producer_epoch = epoch;
        }
        Err(error) => {
            tracing::warn!(%error, "allocating a producer id failed");
            response.error_code = error_code(&error);
        }
    }
    response
}
