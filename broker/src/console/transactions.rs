//! `GET /api/transactions`: open transactions (Ongoing, PrepareCommit, PrepareAbort) from
//! ListTransactions at every broker (each lists its coordinator's), described at that
//! coordinator (DescribeTransactions: producer, start, timeout, partitions). As the user:
//! only transactional ids it may DESCRIBE.

use super::client::Caller;
use super::ConsoleResult;
use futures_util::future::join_all;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, ListTransactionsRequest, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};
use shard::io::Storage;

/// The states of a transaction that is still open.
pub const OPEN_STATES: &[&str] = &["Ongoing", "PrepareCommit", "PrepareAbort"];

async fn at_coordinator<S: Storage>(caller: &Caller<'_, S>, broker: i32) -> Vec<Value> {
    let mut request = ListTransactionsRequest::default();
    request.state_filters = OPEN_STATES.iter().map(|s| StrBytes::from_static_str(s)).collect();
    request.duration_filter = -1;
    let Ok(listed) = caller.call(broker, request).await else { return Vec::new() };
    if listed.transaction_states.is_empty() {
        return Vec::new();
    }
    let mut request = DescribeTransactionsRequest::default();
    request.transactional_ids = listed
        .transaction_states
        .iter()
        .map(|state| TransactionalId(state.transactional_id.0.clone()))
        .collect();
    let Ok(described) = caller.call(broker, request).await else { return Vec::new() };
    let now = shard::runtime::now_ms();
    described
        .transaction_states
        .iter()
        .filter(|state| state.error_code == crate::error::NONE)
        .filter(|state| OPEN_STATES.contains(&&*state.transaction_state))
        .map(|state| {
            let mut partitions: Vec<(String, i32)> = state
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
                .collect();
            partitions.sort();
            let start = state.transaction_start_time_ms;
            json!({
                "transactional_id": state.transactional_id.0.to_string(),
                "producer_id": state.producer_id.0,
                "producer_epoch": state.producer_epoch,
                "state": state.transaction_state.to_string(),
                "start_ms": start,
                "age_ms": if start > 0 { (now - start).max(0) } else { 0 },
                "timeout_ms": state.transaction_timeout_ms,
                "coordinator": broker,
                "partitions": partitions.iter()
                    .map(|(topic, partition)| json!({"topic": topic, "partition": partition}))
                    .collect::<Vec<_>>(),
            })
        })
        .collect()
}

pub async fn list<S: Storage>(caller: &Caller<'_, S>) -> ConsoleResult {
    let brokers: Vec<i32> = caller.node.brokers().iter().map(|b| b.node.0).collect();
    let found = join_all(brokers.iter().map(|broker| at_coordinator(caller, *broker))).await;
    let mut transactions: Vec<Value> = found.into_iter().flatten().collect();
    transactions.sort_by_key(|t| t["transactional_id"].as_str().unwrap_or_default().to_string());
    Ok(json!({ "transactions": transactions }))
}
