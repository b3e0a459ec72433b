//! ListTransactions (key 66, KIP-664; v1 adds the duration filter, KIP-994): the transactional
//! ids this broker coordinates, filtered by state names, producer ids and (v1+) how long their
//! transaction has been open. Unknown state names are echoed in `unknown_state_filters`.

use crate::authorization::{AclOperation, Resource};
use crate::error::NONE;
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::transactions::requests::List;
use crate::services::transactions::state_machine::TxnState;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 1);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let mut response = ListTransactionsResponse::default();
    response.error_code = NONE;
    let known: Vec<&str> = (0..=7).filter_map(TxnState::from_id).map(TxnState::name).collect();
    let states: Vec<String> = request.state_filters.iter().map(|s| s.to_string()).collect();
    response.unknown_state_filters =
        request.state_filters.iter().filter(|s| !known.contains(&s.as_str())).cloned().collect();
    let producers: Vec<i64> = request.producer_id_filters.iter().map(|p| p.0).collect();
    let duration = if context.api_version >= 1 { request.duration_filter } else { -1 };
    let now = node.clock.now_ms();
    for answer in node.transactions.call_all(|| List).await {
        let Ok(listed) = answer else { continue };
        for txn in listed {
            let state_ok = states.is_empty() || states.iter().any(|s| s == txn.state);
            let producer_ok = producers.is_empty() || producers.contains(&txn.producer_id);
            let duration_ok = duration < 0 || (txn.start_ms >= 0 && now - txn.start_ms > duration);
            // As Kafka: only the transactional ids the principal may describe.
            let described = node.allowed(
                context,
                AclOperation::Describe,
                Resource::TransactionalId(&txn.transactional_id),
            );
            if state_ok && producer_ok && duration_ok && described {
                let mut state = TransactionState::default();
                state.transactional_id = TransactionalId(super::str_bytes(&txn.transactional_id));
                state.producer_id = ProducerId(txn.producer_id);
                state.transaction_state = super::str_bytes(txn.state);
                response.transaction_states.push(state);
            }
        }
    }
    response
}
