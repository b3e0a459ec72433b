//! One client connection: reads size-prefixed requests, answers each in order.
//!
//! Requests on a connection are handled one after another, so pipelined requests (Kafka
//! clients keep up to 5 in flight) are answered in the order they were sent.
//! Bad input never panics a shard: a frame over `socket.request.max.bytes`, an unknown API key,
//! an undecodable header or body, or an unsupported version of any API but ApiVersions closes
//! the connection with a log line; an unsupported ApiVersions version gets the v0 answer with
//! UNSUPPORTED_VERSION (KIP-511).

use crate::api;
use crate::error::{error_code, BrokerError};
use crate::handlers;
use crate::node::Node;
use crate::request_context::{Principal, RequestContext, PLAINTEXT_LISTENER};
use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::{ApiKey, ResponseKind};
use shard::io::Storage;
use shard::runtime::net::TcpStream;
use std::net::SocketAddr;
use std::rc::Rc;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// Who is on the other end, for request contexts and logs.
pub struct Peer {
    pub connection_id: u64,
    pub address: SocketAddr,
}

pub async fn serve<S: Storage>(node: Rc<Node<S>>, mut stream: TcpStream, peer: Peer) {
    let _ = stream.set_nodelay(true);
    node.stats.connection_opened();
    let outcome = serve_requests(&node, &mut stream, &peer).await;
    node.stats.connection_closed();
    let address = peer.address;
    match outcome {
        Ok(()) => tracing::debug!(%address, "connection closed by client"),
        Err(reason) if reason.starts_with("write failed") => {
            // The client went away while its answer was being written (a consumer closing
            // during a rebalance, for one); not bad input.
            tracing::debug!(%address, %reason, "client gone before its answer");
        }
        Err(reason) => {
            node.stats.closed_on_error();
            tracing::warn!(%address, %reason, "closing connection");
        }
    }
}

async fn serve_requests<S: Storage>(
    node: &Rc<Node<S>>,
    stream: &mut TcpStream,
    peer: &Peer,
) -> Result<(), String> {
    let limit = node.config.request_bytes_max;
    loop {
        if crate::shutdown::requested() {
            return Ok(()); // answered everything it read; take no new requests
        }
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        match stream.read_exact(&mut prefix).await {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(error) => return Err(format!("read failed: {error}")),
        }
        let len = protocol::frame_len(prefix, limit).map_err(|e| e.to_string())?;
        let mut frame = BytesMut::zeroed(len);
        stream.read_exact(&mut frame).await.map_err(|e| format!("read failed mid-frame: {e}"))?;
        answer(node, stream, peer, frame.freeze()).await?;
    }
}

/// Decodes one request frame, runs its handler and writes the response.
async fn answer<S: Storage>(
    node: &Rc<Node<S>>,
    stream: &mut TcpStream,
    peer: &Peer,
    frame: Bytes,
) -> Result<(), String> {
    let len = frame.len();
    let request = protocol::decode_header(frame).map_err(|e| e.to_string())?;
    let header = &request.header;
    let (version, correlation_id, api_key) =
        (header.request_api_version, header.correlation_id, request.api_key);
    tracing::trace!(?api_key, version, correlation_id, len, "request");
    node.stats.count_request(api_key as i16, len + FRAME_PREFIX_BYTES);
    if !api::supports(api_key, version) {
        if api_key == ApiKey::ApiVersions {
            let refused = error_code(&BrokerError::UnsupportedVersion("ApiVersions", version));
            let response = ResponseKind::ApiVersions(handlers::api_versions::response(
                refused,
                api::SUPPORTED,
            ));
            let written = write(stream, ApiKey::ApiVersions, 0, correlation_id, response).await?;
            node.stats.count_bytes_out(written);
            return Ok(());
        }
        return Err(format!("unsupported {api_key:?} version {version}"));
    }
    let context = RequestContext {
        connection_id: peer.connection_id,
        client_id: header.client_id.as_ref().map(|id| id.to_string()),
        client_address: peer.address,
        listener: PLAINTEXT_LISTENER,
        principal: Principal::Anonymous,
        api_key,
        api_version: version,
        correlation_id,
    };
    let body = protocol::decode_body(api_key, version, request.body).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let _in_progress = node.request_started();
    if let Some(response) = api::dispatch(node, &context, body).await {
        let written = write(stream, api_key, version, correlation_id, response).await?;
        node.stats.count_bytes_out(written);
    }
    node.stats.record_latency(api_key as i16, started.elapsed().as_micros() as u64);
    Ok(())
}

/// Encodes and writes one response; Fetch record batches are written from the buffers they
/// live in (`wire::response_chunks`), not copied into the frame.
async fn write(
    stream: &mut TcpStream,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: ResponseKind,
) -> Result<usize, String> {
    let chunks =
        wire::response_chunks::encode_response_chunks(api_key, version, correlation_id, response)
            .map_err(|e| format!("encoding the {api_key:?} v{version} response: {e}"))?;
    let mut written = 0;
    for chunk in chunks {
        stream.write_all(&chunk).await.map_err(|e| format!("write failed: {e}"))?;
        written += chunk.len();
    }
    Ok(written)
}
