//! `strata txn list|describe|abort`: transactional ids, as `kafka-transactions.sh` shows them.
//! `list` asks every broker (ListTransactions: each lists the ids it coordinates); `describe`
//! asks the id's coordinator (DescribeTransactions); `abort` re-initialises the id
//! (InitProducerId), which aborts its open transaction and fences its current producer, as a
//! new instance of the producer would.

use super::{check, Client};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Kafka's COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and CONCURRENT_TRANSACTIONS: try again.
const RETRIABLE: [i16; 3] = [15, 16, 51];
/// How long the CLI retries.
const PATIENCE: Duration = Duration::from_secs(30);

fn txn_id(value: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(value.to_string()))
}

/// A connection to the coordinator of `transactional_id` (FindCoordinator, key type 1).
fn coordinator(bootstrap: &str, transactional_id: &str) -> Result<Client, String> {
    let mut client = Client::connect(bootstrap)?;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut request = FindCoordinatorRequest::default();
        request.key = StrBytes::from_string(transactional_id.to_string());
        request.key_type = 1;
        let response =
            match client.call(ApiKey::FindCoordinator, 3, RequestKind::FindCoordinator(request))? {
                ResponseKind::FindCoordinator(response) => response,
                _ => return Err("unexpected response".into()),
            };
        if RETRIABLE.contains(&response.error_code) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        check(response.error_code, response.error_message.as_ref(), "finding the coordinator")?;
        return Client::connect(&format!("{}:{}", response.host.as_str(), response.port));
    }
}

fn brokers(bootstrap: &str) -> Result<Vec<String>, String> {
    let mut client = Client::connect(bootstrap)?;
    let mut request = MetadataRequest::default();
    request.topics = Some(Vec::new());
    match client.call(ApiKey::Metadata, 12, RequestKind::Metadata(request))? {
        ResponseKind::Metadata(response) => Ok(response
            .brokers
            .iter()
            .map(|broker| format!("{}:{}", broker.host.as_str(), broker.port))
            .collect()),
        _ => Err("unexpected response".into()),
    }
}

/// Every transactional id on every broker: id, state, producer id.
pub fn list(bootstrap: &str, json_output: bool) -> Result<(), String> {
    let mut rows = Vec::new();
    for broker in brokers(bootstrap)? {
        let mut client = Client::connect(&broker)?;
        let request = ListTransactionsRequest::default();
        match client.call(ApiKey::ListTransactions, 0, RequestKind::ListTransactions(request))? {
            ResponseKind::ListTransactions(response) => {
                check(response.error_code, None, &format!("listing transactions on {broker}"))?;
                for state in response.transaction_states {
                    rows.push((
                        state.transactional_id.0.to_string(),
                        state.transaction_state.to_string(),
                        state.producer_id.0,
                    ));
                }
            }
            _ => return Err("unexpected response".into()),
        }
    }
    rows.sort();
    if json_output {
        let listed: Vec<serde_json::Value> = rows
            .iter()
            .map(|(id, state, producer_id)| {
                serde_json::json!({"transactional_id": id, "state": state,
                                   "producer_id": producer_id})
            })
            .collect();
        println!("{}", serde_json::Value::Array(listed));
        return Ok(());
    }
    println!("{:<40} {:<16} {:>12}", "TRANSACTIONAL ID", "STATE", "PRODUCER ID");
    for (id, state, producer_id) in rows {
        println!("{id:<40} {state:<16} {producer_id:>12}");
    }
    Ok(())
}

/// DescribeTransactions of one id at its coordinator; an id the coordinator does not know is
/// an error that says so.
fn transaction_state(
    client: &mut Client,
    transactional_id: &str,
) -> Result<describe_transactions_response::TransactionState, String> {
    let mut request = DescribeTransactionsRequest::default();
    request.transactional_ids = vec![txn_id(transactional_id)];
    let response = match client.call(
        ApiKey::DescribeTransactions,
        0,
        RequestKind::DescribeTransactions(request),
    )? {
        ResponseKind::DescribeTransactions(response) => response,
        _ => return Err("unexpected response".into()),
    };
    let state = response.transaction_states.into_iter().next().ok_or("no answer")?;
    if super::is_error(state.error_code, ResponseError::TransactionalIdNotFound) {
        return Err(format!(
            "transactional id {transactional_id} does not exist (TRANSACTIONAL_ID_NOT_FOUND)"
        ));
    }
    check(state.error_code, None, &format!("describing {transactional_id}"))?;
    Ok(state)
}

/// One transactional id: state, producer id and epoch, timeout, age of its open transaction,
/// partitions.
pub fn describe(bootstrap: &str, transactional_id: &str, json_output: bool) -> Result<(), String> {
    let mut client = coordinator(bootstrap, transactional_id)?;
    let state = transaction_state(&mut client, transactional_id)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    if json_output {
        let partitions: Vec<serde_json::Value> = state
            .topics
            .iter()
            .map(|t| serde_json::json!({"topic": t.topic.0.as_str(), "partitions": t.partitions}))
            .collect();
        let open_ms =
            (state.transaction_start_time_ms >= 0).then(|| now - state.transaction_start_time_ms);
        let described = serde_json::json!({
            "transactional_id": transactional_id,
            "state": state.transaction_state.as_str(),
            "producer_id": state.producer_id.0,
            "producer_epoch": state.producer_epoch,
            "timeout_ms": state.transaction_timeout_ms,
            "open_ms": open_ms,
            "partitions": partitions,
        });
        println!("{described}");
        return Ok(());
    }
    println!("transactional id:  {transactional_id}");
    println!("state:             {}", state.transaction_state.as_str());
    println!("producer id/epoch: {} / {}", state.producer_id.0, state.producer_epoch);
    println!("timeout:           {} ms", state.transaction_timeout_ms);
    if state.transaction_start_time_ms >= 0 {
        println!("open for:          {} ms", now - state.transaction_start_time_ms);
    }
    for topic in state.topics {
        let partitions: Vec<String> = topic.partitions.iter().map(i32::to_string).collect();
        println!("partitions:        {} [{}]", topic.topic.0.as_str(), partitions.join(", "));
    }
    Ok(())
}

/// Aborts the id's open transaction (if any) and fences its producer: InitProducerId for the
/// id, retried while the coordinator is finishing the abort.
pub fn abort(bootstrap: &str, transactional_id: &str) -> Result<(), String> {
    let mut client = coordinator(bootstrap, transactional_id)?;
    // InitProducerId would create an id that does not exist: ask first.
    transaction_state(&mut client, transactional_id)?;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut request = InitProducerIdRequest::default();
        request.transactional_id = Some(txn_id(transactional_id));
        request.transaction_timeout_ms = 60_000;
        request.producer_id = ProducerId(-1);
        request.producer_epoch = -1;
        let response =
            match client.call(ApiKey::InitProducerId, 4, RequestKind::InitProducerId(request))? {
                ResponseKind::InitProducerId(response) => response,
                _ => return Err("unexpected response".into()),
            };
        if RETRIABLE.contains(&response.error_code) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        check(response.error_code, None, &format!("aborting {transactional_id}"))?;
        println!(
            "{transactional_id}: no transaction open; producer {} fenced (epoch now {})",
            response.producer_id.0, response.producer_epoch
        );
        return Ok(());
    }
}
