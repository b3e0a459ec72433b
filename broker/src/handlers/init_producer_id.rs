//! InitProducerId (key 22): a producer id and epoch for an idempotent producer (KIP-98), or the
//! same id with a bumped epoch for one that asks with its current id and epoch (KIP-360).
//! Allocation runs on shard 0 (`producer_ids`). Transactions are not implemented yet: a
//! request with a transactional id is refused with INVALID_REQUEST (clients treat it as fatal
//! instead of retrying forever).

use crate::error::code;
use crate::router::{call, ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 5);

/// The shard that allocates producer ids.
const ALLOCATOR_SHARD: usize = 0;

pub async fn handle(shard: &Rc<Shard>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if request.transactional_id.is_some() {
        tracing::debug!(
            "InitProducerId with a transactional id refused: transactions are not supported yet"
        );
        response.error_code = code::INVALID_REQUEST;
        return response;
    }
    let ask = ShardRequest::InitProducerId {
        producer_id: request.producer_id.0,
        epoch: request.producer_epoch,
    };
    match call(shard, ALLOCATOR_SHARD, ask).await {
        ShardResponse::ProducerId(Ok((producer_id, epoch))) => {
            response.error_code = code::NONE;
            response.producer_id = ProducerId(producer_id);
            response.producer_epoch = epoch;
        }
        ShardResponse::ProducerId(Err(error)) => {
            tracing::warn!(%error, "allocating a producer id failed");
            response.error_code = crate::error::error_code(&error);
        }
        _ => response.error_code = code::COORDINATOR_NOT_AVAILABLE,
    }
    response
}
