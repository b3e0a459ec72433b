//! One client connection: reads size-prefixed requests, answers each in order.
//!
//! Requests on a connection are handled one after another, so pipelined requests (Kafka
//! clients keep up to 5 in flight) are answered in the order they were sent.
//! Bad input never panics a shard: a frame over `socket.request.max.bytes`, an unknown API key,
//! an undecodable header or body, or an unsupported version of any API but ApiVersions closes
//! the connection with a log line; an unsupported ApiVersions version gets the v0 answer with
//! UNSUPPORTED_VERSION (KIP-511).

use crate::error::code;
use crate::handlers;
use crate::state::Shard;
use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::{ApiKey, ResponseKind};
use shard::runtime::net::TcpStream;
use std::rc::Rc;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

pub async fn serve(shard: Rc<Shard>, mut stream: TcpStream) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let _ = stream.set_nodelay(true);
    shard.stats.borrow_mut().connections_open += 1;
    let outcome = serve_requests(&shard, &mut stream).await;
    shard.stats.borrow_mut().connections_open -= 1;
    match outcome {
        Ok(()) => tracing::debug!(%peer, "connection closed by client"),
        Err(reason) if reason.starts_with("write failed") => {
            // The client went away while its answer was being written (a consumer closing
            // during a rebalance, for one); not bad input.
            tracing::debug!(%peer, %reason, "client gone before its answer");
        }
        Err(reason) => {
            shard.stats.borrow_mut().connections_closed_on_error += 1;
            tracing::warn!(%peer, %reason, "closing connection");
        }
    }
}

async fn serve_requests(shard: &Rc<Shard>, stream: &mut TcpStream) -> Result<(), String> {
    let limit = shard.config.request_bytes_max;
    loop {
        if crate::server::shutting_down() {
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
        let frame: Bytes = frame.freeze();
        let request = protocol::decode_header(frame).map_err(|e| e.to_string())?;
        let header = request.header.clone();
        let version = request.header.request_api_version;
        let correlation_id = request.header.correlation_id;
        let api_key = request.api_key;
        tracing::trace!(?api_key, version, correlation_id, len, "request");
        {
            let mut stats = shard.stats.borrow_mut();
            *stats.requests_by_api.entry(api_key as i16).or_default() += 1;
            stats.bytes_in += (len + FRAME_PREFIX_BYTES) as u64;
        }
        if !handlers::supports(api_key, version) {
            if api_key == ApiKey::ApiVersions {
                let response = ResponseKind::ApiVersions(handlers::api_versions::response(
                    code::UNSUPPORTED_VERSION,
                ));
                let written =
                    write(stream, ApiKey::ApiVersions, 0, correlation_id, response).await?;
                shard.stats.borrow_mut().bytes_out += written as u64;
                continue;
            }
            return Err(format!("unsupported {api_key:?} version {version}"));
        }
        let body =
            protocol::decode_body(api_key, version, request.body).map_err(|e| e.to_string())?;
        let started = std::time::Instant::now();
        let _in_progress = InProgress::new(shard);
        if let Some(response) = handlers::handle(shard, version, &header, body).await {
            let written = write(stream, api_key, version, correlation_id, response).await?;
            shard.stats.borrow_mut().bytes_out += written as u64;
        }
        let micros = started.elapsed().as_micros() as u64;
        shard.stats.borrow_mut().record_latency(api_key as i16, micros);
    }
}

/// Counts a request in `Shard::requests_in_progress` from decode to answer.
struct InProgress<'a>(&'a Shard);

impl<'a> InProgress<'a> {
    fn new(shard: &'a Shard) -> Self {
        shard.requests_in_progress.set(shard.requests_in_progress.get() + 1);
        InProgress(shard)
    }
}

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        self.0.requests_in_progress.set(self.0.requests_in_progress.get().saturating_sub(1));
    }
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
