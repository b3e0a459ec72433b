//! Markers for partitions another broker leads: one WriteTxnMarkers (v1) request over a
//! connection to that broker's listener, bounded in time and answer size. A connection per
//! call: markers are written once per partition per transaction, far from the produce path.

use super::MarkerFailure;
use crate::services::partitions::txn_markers::MarkerSpec;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, RequestHeader, RequestKind, ResponseKind, TopicName, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use shard::runtime::net::TcpStream;
use std::time::Duration;
use wire::ids::TopicPartition;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// The version sent (Kafka 4 accepts only v1, KIP-896).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 1;
/// How long one call may take (connect, write, replicate, answer).
const CALL_TIMEOUT: Duration = Duration::from_secs(35);
/// The largest answer read.
const ANSWER_BYTES_MAX: usize = 1 << 20;

/// Error codes after which the marker is not sent again (Kafka's
/// `TransactionMarkerRequestCompletionHandler`): the producer or the coordinator was fenced,
/// or the partition is gone.
const GIVE_UP_CODES: [i16; 3] = [47, 52, 3];

/// Writes `marker` to `partition` on the broker at `host:port`.
pub async fn write_marker(
    host: &str,
    port: u16,
    partition: &TopicPartition,
    marker: MarkerSpec,
) -> Result<(), MarkerFailure> {
    let call = async {
        let body = exchange(host, port, partition, marker).await.map_err(MarkerFailure::Retry)?;
        let (_, response) = protocol::decode_response(
            ApiKey::WriteTxnMarkers,
            WRITE_TXN_MARKERS_VERSION,
            body.freeze(),
        )
        .map_err(|e| MarkerFailure::Retry(e.to_string()))?;
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
            code if GIVE_UP_CODES.contains(&code) => {
                Err(MarkerFailure::GiveUp(format!("{partition}: error code {code}")))
            }
            code => Err(MarkerFailure::Retry(format!("{partition}: error code {code}"))),
        }
    };
    futures_lite::future::or(call, async {
        shard::runtime::sleep(CALL_TIMEOUT).await;
        Err(MarkerFailure::Retry(format!("no WriteTxnMarkers answer from {host}:{port}")))
    })
    .await
}

async fn exchange(
    host: &str,
    port: u16,
    partition: &TopicPartition,
    marker: MarkerSpec,
) -> Result<bytes::BytesMut, String> {
    use std::net::ToSocketAddrs;
    let address = (host, port)
        .to_socket_addrs()
        .map_err(|error| format!("resolving {host}:{port}: {error}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port} resolves to nothing"))?;
    let mut socket = TcpStream::connect_timeout(address, Duration::from_secs(5))
        .await
        .map_err(|error| format!("connecting to {address}: {error}"))?;
    let _ = socket.set_nodelay(true);
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
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::WriteTxnMarkers as i16)
        .with_request_api_version(WRITE_TXN_MARKERS_VERSION)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("strata-txn-coordinator")));
    let frame = protocol::encode_request(&header, &RequestKind::WriteTxnMarkers(request))?;
    socket.write_all(&frame).await.map_err(|e| format!("sending markers: {e}"))?;
    let mut prefix = [0u8; FRAME_PREFIX_BYTES];
    socket.read_exact(&mut prefix).await.map_err(|e| format!("reading the answer: {e}"))?;
    let len = protocol::frame_len(prefix, ANSWER_BYTES_MAX).map_err(|e| e.to_string())?;
    shard::runtime::net::read_exact_to_new(&socket, len)
        .await
        .map_err(|e| format!("reading the answer: {e}"))
}
