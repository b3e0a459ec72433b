//! DescribeTransactions (key 65, KIP-664): each transactional id's state as its coordinator
//! holds it (state, timeout, start time, producer id and epoch, partitions). An id this broker
//! does not coordinate is NOT_COORDINATOR; an unknown one TRANSACTIONAL_ID_NOT_FOUND.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::transactions::requests::Describe;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut response = DescribeTransactionsResponse::default();
    for id in request.transactional_ids {
        let transactional_id = id.0.to_string();
        let mut state = TransactionState::default();
        state.transactional_id = id;
        state.producer_id = ProducerId(-1);
        state.producer_epoch = -1;
        state.transaction_start_time_ms = -1;
        let call = Describe { transactional_id: transactional_id.clone() };
        let allowed = node.allowed(
            context,
            AclOperation::Describe,
            Resource::TransactionalId(&transactional_id),
        );
        let described = match allowed {
            false => Err(crate::error::BrokerError::TransactionalIdAuthorizationFailed(
                transactional_id.clone(),
            )),
            true => node
                .transactions
                .call(&transactional_id, call)
                .await
                .and_then(|described| described),
        };
        match described {
            Ok(txn) => {
                state.error_code = NONE;
                state.transaction_state = super::str_bytes(txn.state);
                state.transaction_timeout_ms = txn.timeout_ms;
                state.transaction_start_time_ms = txn.start_ms;
                state.producer_id = ProducerId(txn.producer_id);
                state.producer_epoch = txn.producer_epoch;
                for partition in txn.partitions {
                    match state.topics.iter_mut().find(|t| t.topic.0.as_str() == partition.topic) {
                        Some(topic) => topic.partitions.push(partition.partition.0),
                        None => {
                            let mut topic = TopicData::default();
                            topic.topic = TopicName(super::str_bytes(&partition.topic));
                            topic.partitions.push(partition.partition.0);
                            state.topics.push(topic);
                        }
                    }
                }
            }
            Err(error) => state.error_code = error_code(&error),
        }
        response.transaction_states.push(state);
    }
    response
}
