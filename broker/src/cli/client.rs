//! A small blocking Kafka client for the CLI: one TCP connection, one request at a time, using
//! `wire::protocol` and the `kafka-protocol` message types. Not for the data path.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// Largest response the CLI accepts.
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;
/// How long connecting to one address may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a response may take, unless a command sets its own (`set_timeout`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Client {
    stream: TcpStream,
    /// The address connected to, named in every error.
    address: String,
    /// How long a response may take.
    timeout: Duration,
    next_correlation_id: i32,
}

impl Client {
    /// Connects to the first address of `bootstrap` (comma-separated `host:port` list, as
    /// Kafka's tools take) that accepts within `CONNECT_TIMEOUT`.
    pub fn connect(bootstrap: &str) -> Result<Self, String> {
        let mut failures = Vec::new();
        for address in bootstrap.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match connect_one(address) {
                Ok(stream) => {
                    let mut client = Self {
                        stream,
                        address: address.to_string(),
                        timeout: REQUEST_TIMEOUT,
                        next_correlation_id: 1,
                    };
                    client.set_timeout(REQUEST_TIMEOUT)?;
                    let _ = client.stream.set_nodelay(true);
                    return Ok(client);
                }
                Err(error) => failures.push(format!("{address}: {error}")),
            }
        }
        if failures.is_empty() {
            return Err(format!("no address to connect to in {bootstrap:?}"));
        }
        Err(format!("connecting to {bootstrap}: {}", failures.join("; ")))
    }

    /// The address this client is connected to.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// How long a response (and sending a request) may take.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), String> {
        self.timeout = timeout;
        self.stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        self.stream.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())
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
        let address = &self.address;
        self.stream
            .write_all(&frame)
            .map_err(|e| format!("sending {api_key:?} to {address}: {e}"))?;
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        self.stream
            .read_exact(&mut prefix)
            .map_err(|e| read_error(api_key, address, self.timeout, &e))?;
        let len = protocol::frame_len(prefix, RESPONSE_BYTES_MAX)
            .map_err(|e| format!("{address} answered {api_key:?} with no Kafka frame: {e}"))?;
        let mut body = vec![0u8; len];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| read_error(api_key, address, self.timeout, &e))?;
        let (header, response) = protocol::decode_response(api_key, version, Bytes::from(body))
            .map_err(|e| format!("{address} answered {api_key:?} with no Kafka response: {e}"))?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "correlation id {} does not match {correlation_id}",
                header.correlation_id
            ));
        }
        Ok(response)
    }
}

/// Connects to one `host:port`, trying each address it resolves to within `CONNECT_TIMEOUT`.
fn connect_one(address: &str) -> Result<TcpStream, String> {
    let resolved = address.to_socket_addrs().map_err(|e| e.to_string())?;
    let mut last = String::from("resolves to no address");
    for socket_address in resolved {
        match TcpStream::connect_timeout(&socket_address, CONNECT_TIMEOUT) {
            Ok(stream) => return Ok(stream),
            Err(error) => last = error.to_string(),
        }
    }
    Err(last)
}

fn read_error(api_key: ApiKey, address: &str, timeout: Duration, error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
            "{address} did not answer {api_key:?} within {} ms (is it a Kafka listener?)",
            timeout.as_millis()
        ),
        _ => format!("reading the {api_key:?} response from {address}: {error}"),
    }
}
