//! A small blocking Kafka client for the CLI: one TCP connection, one request at a time, using
//! `wire::protocol` and the `kafka-protocol` message types. Not for the data path.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// Largest response the CLI accepts.
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;

pub struct Client {
    stream: TcpStream,
    next_correlation_id: i32,
}

impl Client {
    /// Connects to the first address of `bootstrap` (comma-separated `host:port` list, as
    /// Kafka's tools take) that accepts.
    pub fn connect(bootstrap: &str) -> Result<Self, String> {
        let mut failures = Vec::new();
        let mut connected = None;
        for address in bootstrap.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match TcpStream::connect(address) {
                Ok(stream) => {
                    connected = Some(stream);
                    break;
                }
                Err(error) => failures.push(format!("{address}: {error}")),
            }
        }
        let stream = connected
            .ok_or_else(|| format!("connecting to {bootstrap}: {}", failures.join("; ")))?;
        stream.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        Ok(Self { stream, next_correlation_id: 1 })
    }

    /// How long a response may take (60 s unless set).
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), String> {
        self.stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())
    }

    /// Sends `request` as `version` of `api_key` and returns the decoded response.
    pub fn call(
        &mut self,
        api_key: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> Result<ResponseKind, String> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("strata-cli")));
        let frame = protocol::encode_request(&header, &request)?;
        self.stream.write_all(&frame).map_err(|e| format!("sending {api_key:?}: {e}"))?;
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        self.stream
            .read_exact(&mut prefix)
            .map_err(|e| format!("reading {api_key:?} response: {e}"))?;
        let len = protocol::frame_len(prefix, RESPONSE_BYTES_MAX).map_err(|e| e.to_string())?;
        let mut body = vec![0u8; len];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| format!("reading {api_key:?} response: {e}"))?;
        let (header, response) = protocol::decode_response(api_key, version, Bytes::from(body))
            .map_err(|e| e.to_string())?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "correlation id {} does not match {correlation_id}",
                header.correlation_id
            ));
        }
        Ok(response)
    }
}
