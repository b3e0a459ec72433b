//! One client connection: reads size-prefixed requests, answers each in order.
//!
//! Requests on a connection are handled one after another, so pipelined requests (Kafka
//! clients keep up to 5 in flight) are answered in the order they were sent.
//! Resource bounds (issue "bounded resources"): a frame's whole size is reserved from the
//! shard's request budget (`queued.max.request.bytes`, see `budget`) before its body is read,
//! and held until its answer is written; a connection with no request for
//! `connections.max.idle.ms` is closed; a frame must arrive whole within
//! `socket.request.frame.timeout.ms` of its first byte (waiting for the budget included), or
//! the connection is closed. Both closes are counted in `/metrics`.
//! Bad input never panics a shard: a frame over `socket.request.max.bytes`, an unknown API key,
//! an undecodable header or body, or an unsupported version of any API but ApiVersions closes
//! the connection with a log line; an unsupported ApiVersions version gets the v0 answer with
//! UNSUPPORTED_VERSION (KIP-511).

use super::budget::RequestBudget;
use super::limits::ConnectionSlot;
use crate::api;
use crate::error::{error_code, BrokerError};
use crate::handlers;
use crate::node::Node;
use crate::request_context::{Principal, RequestContext, PLAINTEXT_LISTENER};
use crate::stats::Closed;
use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::{ApiKey, ResponseKind};
use shard::io::Storage;
use shard::runtime::net::TcpStream;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// Who is on the other end, for request contexts and logs.
pub struct Peer {
    pub connection_id: u64,
    pub address: SocketAddr,
}

/// The timeouts of a connection (from the configuration).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionTimeouts {
    /// `connections.max.idle.ms`; `None`: never.
    pub idle: Option<Duration>,
    /// `socket.request.frame.timeout.ms`.
    pub frame: Duration,
}

/// Why a connection ended.
enum Ending {
    /// The client closed it between requests.
    ClientClosed,
    /// Shutdown: every request read was answered.
    Shutdown,
    /// The broker closed it: idle, or a frame that did not arrive in time.
    Closed(Closed),
    /// The client went away while its answer was written (not bad input).
    WriteFailed(String),
    /// Bad input or a read error: closed with a log line.
    Failed(String),
}

/// What a connection is served with.
pub struct Connection<S: Storage> {
    pub node: Rc<Node<S>>,
    pub budget: Rc<RequestBudget>,
    pub timeouts: ConnectionTimeouts,
    pub peer: Peer,
    /// Its place in the broker's connection counts, released when it closes.
    pub slot: ConnectionSlot,
}

/// `future`, or `None` once `deadline` passes.
async fn before<T>(deadline: Instant, future: impl Future<Output = T>) -> Option<T> {
    let left = deadline.saturating_duration_since(Instant::now());
    futures_lite::future::or(async { Some(future.await) }, async {
        shard::runtime::sleep(left).await;
        None
    })
    .await
}

pub async fn serve<S: Storage>(connection: Connection<S>, mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let node = connection.node.clone();
    node.stats.connection_opened();
    let ending = serve_requests(&connection, &mut stream).await;
    node.stats.connection_closed();
    let address = connection.peer.address;
    match ending {
        Ending::ClientClosed | Ending::Shutdown => {
            tracing::debug!(%address, "connection closed")
        }
        Ending::Closed(reason) => {
            node.stats.closed_by_broker(reason);
            tracing::info!(%address, reason = reason.label(), "closing connection");
        }
        Ending::WriteFailed(reason) => {
            // The client went away while its answer was being written (a consumer closing
            // during a rebalance, for one); not bad input.
            tracing::debug!(%address, %reason, "client gone before its answer");
        }
        Ending::Failed(reason) => {
            node.stats.closed_on_error();
            tracing::warn!(%address, %reason, "closing connection");
        }
    }
    drop(connection);
}

/// Reads the first byte of the next request, waiting at most the idle timeout.
async fn first_byte(stream: &mut TcpStream, idle: Option<Duration>) -> Result<u8, Ending> {
    let mut byte = [0u8; 1];
    let read = match idle {
        Some(idle) => before(Instant::now() + idle, stream.read(&mut byte))
            .await
            .ok_or(Ending::Closed(Closed::Idle))?,
        None => stream.read(&mut byte).await,
    };
    match read {
        Ok(0) => Err(Ending::ClientClosed),
        Ok(_) => Ok(byte[0]),
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {
            Err(Ending::ClientClosed)
        }
        Err(error) => Err(Ending::Failed(format!("read failed: {error}"))),
    }
}

/// Fills `buffer` before `deadline`.
async fn read_by(
    stream: &mut TcpStream,
    buffer: &mut [u8],
    deadline: Instant,
) -> Result<(), Ending> {
    match before(deadline, stream.read_exact(buffer)).await {
        None => Err(Ending::Closed(Closed::FrameDeadline)),
        Some(Ok(())) => Ok(()),
        Some(Err(error)) => Err(Ending::Failed(format!("read failed mid-frame: {error}"))),
    }
}

async fn serve_requests<S: Storage>(connection: &Connection<S>, stream: &mut TcpStream) -> Ending {
    let limit = connection.node.config.request_bytes_max;
    loop {
        if crate::shutdown::requested() {
            return Ending::Shutdown; // answered everything it read; take no new requests
        }
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        match first_byte(stream, connection.timeouts.idle).await {
            Ok(byte) => prefix[0] = byte,
            Err(ending) => return ending,
        }
        let deadline = Instant::now() + connection.timeouts.frame;
        if let Err(ending) = read_by(stream, &mut prefix[1..], deadline).await {
            return ending;
        }
        let len = match protocol::frame_len(prefix, limit) {
            Ok(len) => len,
            Err(error) => return Ending::Failed(error.to_string()),
        };
        // Held until the answer is written: the decoded request borrows the frame's bytes.
        let Some(reservation) = before(deadline, connection.budget.reserve(len as u64)).await
        else {
            return Ending::Closed(Closed::FrameDeadline);
        };
        let mut frame = BytesMut::zeroed(len);
        if let Err(ending) = read_by(stream, &mut frame, deadline).await {
            return ending;
        }
        if let Err(ending) = answer(connection, stream, frame.freeze()).await {
            return ending;
        }
        drop(reservation);
    }
}

/// Decodes one request frame, runs its handler and writes the response.
async fn answer<S: Storage>(
    connection: &Connection<S>,
    stream: &mut TcpStream,
    frame: Bytes,
) -> Result<(), Ending> {
    let node = &connection.node;
    let len = frame.len();
    let request = protocol::decode_header(frame).map_err(|e| Ending::Failed(e.to_string()))?;
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
        return Err(Ending::Failed(format!("unsupported {api_key:?} version {version}")));
    }
    let context = RequestContext {
        connection_id: connection.peer.connection_id,
        client_id: header.client_id.as_ref().map(|id| id.to_string()),
        client_address: connection.peer.address,
        listener: PLAINTEXT_LISTENER,
        principal: Principal::Anonymous,
        api_key,
        api_version: version,
        correlation_id,
    };
    let body = protocol::decode_body(api_key, version, request.body)
        .map_err(|e| Ending::Failed(e.to_string()))?;
    let started = Instant::now();
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
) -> Result<usize, Ending> {
    let chunks =
        wire::response_chunks::encode_response_chunks(api_key, version, correlation_id, response)
            .map_err(|e| {
            Ending::Failed(format!("encoding the {api_key:?} v{version} response: {e}"))
        })?;
    let mut written = 0;
    for chunk in chunks {
        stream.write_all(&chunk).await.map_err(|e| Ending::WriteFailed(e.to_string()))?;
        written += chunk.len();
    }
    Ok(written)
}
