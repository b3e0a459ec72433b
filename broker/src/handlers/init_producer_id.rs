//! InitProducerId (key 22): a producer id and epoch for an idempotent producer (KIP-98), or the
//! same id with a bumped epoch for one that asks with its current id and epoch (KIP-360),
//! allocated on shard 0 (`services::producer_ids`). With a transactional id the request goes
//! to the id's transaction coordinator (`services::transactions`): a new id gets a producer
//! id, a known one its next epoch, and an open transaction of an older producer with the same
//! id is aborted first (zombie fencing). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, txn_error_code, BrokerError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::transactions::requests;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 5);
/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_VERSION: i16 = 4;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    let (producer_id, epoch) = (request.producer_id.0, request.producer_epoch);
    if (producer_id < 0) != (epoch < 0) {
        let refused = BrokerError::InvalidRequest("producer id and epoch must both be set".into());
        response.error_code = error_code(&refused);
        return response;
    }
    let result = match request.transactional_id.as_ref().map(|id| id.0.to_string()) {
        Some(id) if id.is_empty() => {
            Err(BrokerError::InvalidRequest("an empty transactional id".into()))
        }
        // As Kafka: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE
        // on the cluster or WRITE on some topic (KIP-679).
        Some(transactional_id)
            if !node.allowed(
                context,
                AclOperation::Write,
                Resource::TransactionalId(&transactional_id),
            ) =>
        {
            Err(BrokerError::TransactionalIdAuthorizationFailed(transactional_id))
        }
        None if !node.allowed(context, AclOperation::IdempotentWrite, Resource::Cluster)
            && !node.allowed_any(
                context,
                AclOperation::Write,
                crate::metadata::acl::ResourceType::Topic,
            ) =>
        {
            Err(BrokerError::ClusterAuthorizationFailed)
        }
        Some(transactional_id) => {
            let expected = (producer_id >= 0).then_some((producer_id, epoch));
            let call = requests::InitProducerId {
                transactional_id: transactional_id.clone(),
                timeout_ms: request.transaction_timeout_ms,
                expected,
            };
            node.transactions.call(&transactional_id, call).await.and_then(|answer| answer)
        }
        None => node.metadata_router.init_producer_id(producer_id, epoch).await,
    };
    match result {
        Ok((producer_id, epoch)) => {
            response.error_code = NONE;
            response.producer_id = ProducerId(producer_id);
            response.producer_epoch = epoch;
        }
        Err(error) => {
            tracing::debug!(%error, "InitProducerId refused");
            response.error_code =
                txn_error_code(&error, context.api_version, PRODUCER_FENCED_VERSION);
        }
    }
    response
}
