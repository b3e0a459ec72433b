//! EndTxn (key 26): commits or aborts the producer's transaction on its coordinator. Answered
//! once the decision (PrepareCommit/PrepareAbort) is durable and the markers are written, or
//! after a bound with the markers still being written in the background (the decision stands;
//! the producer's next request for the id meets CONCURRENT_TRANSACTIONS until they are).
//! PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2. v5 (transaction version 2) is not
//! served: strata does not advertise `transaction.version`.

use crate::authorization::{AclOperation, Resource};
use crate::error::{txn_error_code, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::transactions::requests::EndTxn;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 4);
/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_VERSION: i16 = 2;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: EndTxnRequest,
) -> EndTxnResponse {
    let mut response = EndTxnResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    let transactional_id = request.transactional_id.0.to_string();
    let call = EndTxn {
        transactional_id: transactional_id.clone(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        commit: request.committed,
    };
    let result =
        if node.allowed(context, AclOperation::Write, Resource::TransactionalId(&transactional_id))
        {
            node.transactions.call(&transactional_id, call).await.and_then(|ended| ended)
        } else {
            Err(crate::error::BrokerError::TransactionalIdAuthorizationFailed(transactional_id))
        };
    response.error_code = match result {
        Ok(()) => NONE,
        Err(error) => {
            tracing::debug!(%error, "EndTxn refused");
            txn_error_code(&error, context.api_version, PRODUCER_FENCED_VERSION)
        }
    };
    response
}
