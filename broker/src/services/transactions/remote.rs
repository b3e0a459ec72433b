//! Calls between brokers for transactions: markers for partitions another broker leads (one
//! WriteTxnMarkers v1 request), and partition verification with a coordinator on another
//! broker (AddPartitionsToTxn v4 `verify_only`, KIP-890). Each is one request over a new
//! connection to that broker's listener, bounded in time and answer size: both happen once
//! per partition per transaction, far from the produce path's steady state.

use super::MarkerFailure;
use crate::services::partitions::txn_markers::MarkerSpec;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, ProducerId, RequestHeader, RequestKind, ResponseKind,
    TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;
use wire::ids::TopicPartition;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// The version sent (Kafka 4 accepts only v1, KIP-896).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 1;
/// The AddPartitionsToTxn version of a verification (the first broker-to-broker one).
pub const VERIFY_VERSION: i16 = 4;
/// How long one call may take (connect, write, replicate, answer).
const CALL_TIMEOUT: Duration = Duration::from_secs(35);
/// The largest answer read.
const ANSWER_BYTES_MAX: usize = 1 << 20;

/// Writes `marker` to `partition` on the broker at `host:port`.
pub async fn write_marker(
    host: &str,
    port: u16,
    partition: &TopicPartition,
    marker: MarkerSpec,
) -> Result<(), MarkerFailure> {
    let mut topic = WritableTxnMarkerTopic::default();
    topic.name = TopicName(StrBytes::from_string(partition.topic.clone()));
    topic.partition_indexes = vec![partition.partition.0];
    let mut entry = WritableTxnMarker::default();
    entry.producer_id = ProducerId(marker.producer_id);
    entry.producer_epoch = marker.producer_epoch;
    entry.transaction_result = marker.commit;
    entry.coordinator_epoch = marker.coordinator_epoch;
    entry.topics = vec![topic];
    let mut request = WriteTxnMarkersRequest::default();
    request.markers = vec![entry];
    let request = RequestKind::WriteTxnMarkers(request);
    let response = call(host, port, ApiKey::WriteTxnMarkers, WRITE_TXN_MARKERS_VERSION, request)
        .await
        .map_err(MarkerFailure::Retry)?;
    let ResponseKind::WriteTxnMarkers(response) = response else {
        return Err(MarkerFailure::Retry("not a WriteTxnMarkers answer".into()));
    };
    let code = response
        .markers
        .iter()
        .flat_map(|m| m.topics.iter())
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .next()
        .ok_or_else(|| MarkerFailure::Retry("an answer without the partition".into()))?;
    match code {
        0 => Ok(()),
        code if crate::error::answered::marker_gives_up(code) => {
            Err(MarkerFailure::GiveUp(format!("{partition}: error code {code}")))
        }
        code => Err(MarkerFailure::Retry(format!("{partition}: error code {code}"))),
    }
}

/// Partition verification (KIP-890 part 1) with the coordinator at `host:port`:
/// AddPartitionsToTxn v4 with `verify_only`. The coordinator's code for the partition (0: in
/// the ongoing transaction), or why there is none.
pub async fn verify_partition(
    host: &str,
    port: u16,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partition: &TopicPartition,
) -> Result<i16, String> {
    let mut topic = AddPartitionsToTxnTopic::default();
    topic.name = TopicName(StrBytes::from_string(partition.topic.clone()));
    topic.partitions = vec![partition.partition.0];
    let mut transaction = AddPartitionsToTxnTransaction::default();
    transaction.transactional_id = TransactionalId(StrBytes::from_string(transactional_id.into()));
    transaction.producer_id = ProducerId(producer_id);
    transaction.producer_epoch = producer_epoch;
    transaction.verify_only = true;
    transaction.topics = vec![topic];
    let mut request = AddPartitionsToTxnRequest::default();
    request.transactions = vec![transaction];
    let request = RequestKind::AddPartitionsToTxn(request);
    let response = call(host, port, ApiKey::AddPartitionsToTxn, VERIFY_VERSION, request).await?;
    let ResponseKind::AddPartitionsToTxn(response) = response else {
        return Err("not an AddPartitionsToTxn answer".into());
    };
    if response.error_code != 0 {
        return Ok(response.error_code);
    }
    response
        .results_by_transaction
        .iter()
        .filter(|result| result.transactional_id.0.as_str() == transactional_id)
        .flat_map(|result| result.topic_results.iter())
        .filter(|topic| topic.name.0.as_str() == partition.topic)
        .flat_map(|topic| topic.results_by_partition.iter())
        .find(|result| result.partition_index == partition.partition.0)
        .map(|result| result.partition_error_code)
        .ok_or_else(|| "an answer without the partition".into())
}

/// One request to the broker at `host:port` over a new connection, bounded by
/// `CALL_TIMEOUT` and `ANSWER_BYTES_MAX`.
async fn call(
    host: &str,
    port: u16,
    api_key: ApiKey,
    version: i16,
    request: RequestKind,
) -> Result<ResponseKind, String> {
    let exchange = async {
        let body = exchange(host, port, api_key, version, request).await?;
        let (_, response) = protocol::decode_response(api_key, version, body.freeze())
            .map_err(|e| e.to_string())?;
        Ok(response)
    };
    futures_lite::future::or(exchange, async {
        shard::runtime::sleep(CALL_TIMEOUT).await;
        Err(format!("no {api_key:?} answer from {host}:{port} in {CALL_TIMEOUT:?}"))
    })
    .await
}

async fn exchange(
    host: &str,
    port: u16,
    api_key: ApiKey,
    version: i16,
    request: RequestKind,
) -> Result<bytes::BytesMut, String> {
    let mut socket =
        crate::peer::connect(host, port, Duration::from_secs(5), "strata-txn-coordinator").await?;
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("strata-txn-coordinator")));
    let frame = protocol::encode_request(&header, &request)?;
    socket.write_all(&frame).await.map_err(|e| format!("sending {api_key:?}: {e}"))?;
    let mut prefix = [0u8; FRAME_PREFIX_BYTES];
    socket.read_exact(&mut prefix).await.map_err(|e| format!("reading the answer: {e}"))?;
    let len = protocol::frame_len(prefix, ANSWER_BYTES_MAX).map_err(|e| e.to_string())?;
    socket.read_body(len).await.map_err(|e| format!("reading the answer: {e}"))
}
