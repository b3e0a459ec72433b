//! Connections from this broker to another broker's inter-broker listener (issue #18): the
//! replica fetchers' streams and the transaction coordinator's calls. The listener's security
//! protocol decides what a connection does before its first request: TLS (rustls through
//! futures-rustls; the peer's certificate checked against `ssl.truststore.location`, for the
//! host it registered; this broker's keystore offered as its client certificate), then SASL
//! PLAIN (SaslHandshake v1, SaslAuthenticate v2) as `sasl.jaas.config`'s `username`, as Kafka's
//! brokers log in to each other. A failed step fails the connection with a message naming it.
//!
//! The settings are the process's (`configure`, once at startup, from the broker config): a
//! broker has one inter-broker listener. Without `configure` (a single node, in-process
//! tests) connections are plain TCP.
//! Runs on: any shard (glommio's TcpStream; the TLS client config is `Send + Sync`).

use crate::config::security::{PeerSecurity, Secret};
use bytes::BytesMut;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, RequestKind, ResponseKind, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use rustls::pki_types::ServerName;
use shard::runtime::net::TcpStream;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// The largest SASL answer read from a peer.
const SASL_ANSWER_BYTES_MAX: usize = 64 << 10;

/// How this process reaches other brokers (set once).
struct Settings {
    tls: Option<Arc<rustls::ClientConfig>>,
    login: Option<(String, Secret)>,
}

static INTER_BROKER: OnceLock<Settings> = OnceLock::new();

/// Sets how this process reaches other brokers; the first call wins.
pub fn configure(security: &PeerSecurity) -> Result<(), String> {
    let tls = security.tls.as_ref().map(crate::config::tls::client_config).transpose()?;
    let _ = INTER_BROKER.set(Settings { tls, login: security.login.clone() });
    Ok(())
}

/// A connection to another broker: plain TCP or TLS over it.
pub enum PeerStream {
    Plain(TcpStream),
    Tls(Box<futures_rustls::client::TlsStream<TcpStream>>),
}

impl PeerStream {
    /// Reads exactly `len` bytes into a new buffer (plain TCP: without zero-filling it first,
    /// `read_exact_to_new`).
    pub async fn read_body(&mut self, len: usize) -> std::io::Result<BytesMut> {
        match self {
            PeerStream::Plain(stream) => shard::runtime::net::read_exact_to_new(stream, len).await,
            PeerStream::Tls(stream) => {
                let mut body = BytesMut::zeroed(len);
                stream.read_exact(&mut body).await?;
                Ok(body)
            }
        }
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            PeerStream::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            PeerStream::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            PeerStream::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(stream) => Pin::new(stream).poll_close(cx),
            PeerStream::Tls(stream) => Pin::new(stream.as_mut()).poll_close(cx),
        }
    }
}

/// Writes one request frame on `stream` and reads its answer's body (at most
/// `answer_bytes_max`).
pub async fn exchange_frame(
    stream: &mut PeerStream,
    frame: &[u8],
    answer_bytes_max: usize,
) -> Result<bytes::Bytes, String> {
    stream.write_all(frame).await.map_err(|e| format!("sending: {e}"))?;
    stream.flush().await.map_err(|e| format!("sending: {e}"))?;
    let mut prefix = [0u8; FRAME_PREFIX_BYTES];
    stream.read_exact(&mut prefix).await.map_err(|e| format!("reading the answer: {e}"))?;
    let len = protocol::frame_len(prefix, answer_bytes_max).map_err(|e| e.to_string())?;
    let body = stream.read_body(len).await.map_err(|e| format!("reading the answer: {e}"))?;
    Ok(body.freeze())
}

/// Connects to another broker's inter-broker listener at `host:port` and, as its protocol
/// asks, runs TLS and logs in, all within `timeout`.
pub async fn connect(
    host: &str,
    port: u16,
    timeout: Duration,
    client_id: &'static str,
) -> Result<PeerStream, String> {
    let connecting = async {
        use std::net::ToSocketAddrs;
        let address = (host, port)
            .to_socket_addrs()
            .map_err(|error| format!("resolving {host}:{port}: {error}"))?
            .next()
            .ok_or_else(|| format!("{host}:{port} resolves to nothing"))?;
        let socket = TcpStream::connect_timeout(address, timeout)
            .await
            .map_err(|error| format!("connecting to {address}: {error}"))?;
        let _ = socket.set_nodelay(true);
        let Some(settings) = INTER_BROKER.get() else { return Ok(PeerStream::Plain(socket)) };
        let mut stream = match &settings.tls {
            None => PeerStream::Plain(socket),
            Some(config) => {
                let name = ServerName::try_from(host.to_string())
                    .map_err(|e| format!("{host} as a TLS server name: {e}"))?;
                let tls = futures_rustls::TlsConnector::from(config.clone())
                    .connect(name, socket)
                    .await
                    .map_err(|e| format!("TLS handshake with {host}:{port}: {e}"))?;
                PeerStream::Tls(Box::new(tls))
            }
        };
        if let Some((user, password)) = &settings.login {
            log_in(&mut stream, user, password, client_id)
                .await
                .map_err(|e| format!("logging in to {host}:{port} as {user}: {e}"))?;
        }
        Ok(stream)
    };
    futures_lite::future::or(connecting, async {
        shard::runtime::sleep(timeout).await;
        Err(format!("connecting to {host}:{port}: not done within {timeout:?}"))
    })
    .await
}

/// SASL PLAIN over Kafka frames: SaslHandshake v1, then SaslAuthenticate v2.
async fn log_in(
    stream: &mut PeerStream,
    user: &str,
    password: &Secret,
    client_id: &'static str,
) -> Result<(), String> {
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str("PLAIN");
    match exchange(stream, 1, ApiKey::SaslHandshake, 1, handshake.into(), client_id).await? {
        ResponseKind::SaslHandshake(answer) if answer.error_code == 0 => {}
        ResponseKind::SaslHandshake(answer) => {
            return Err(format!(
                "SaslHandshake PLAIN refused ({}), offered: {:?}",
                answer.error_code, answer.mechanisms
            ))
        }
        _ => return Err("not a SaslHandshake answer".into()),
    }
    let mut token = Vec::with_capacity(user.len() + password.0.len() + 2);
    token.push(0);
    token.extend_from_slice(user.as_bytes());
    token.push(0);
    token.extend_from_slice(password.0.as_bytes());
    let mut authenticate = SaslAuthenticateRequest::default();
    authenticate.auth_bytes = bytes::Bytes::from(token);
    match exchange(stream, 2, ApiKey::SaslAuthenticate, 2, authenticate.into(), client_id).await? {
        ResponseKind::SaslAuthenticate(answer) if answer.error_code == 0 => Ok(()),
        ResponseKind::SaslAuthenticate(answer) => Err(format!(
            "SaslAuthenticate refused ({}): {}",
            answer.error_code,
            answer.error_message.as_deref().unwrap_or("")
        )),
        _ => Err("not a SaslAuthenticate answer".into()),
    }
}

async fn exchange(
    stream: &mut PeerStream,
    correlation_id: i32,
    api_key: ApiKey,
    version: i16,
    request: RequestKind,
    client_id: &'static str,
) -> Result<ResponseKind, String> {
    call(stream, correlation_id, (api_key, version), request, client_id, SASL_ANSWER_BYTES_MAX)
        .await
}

/// One request of `(api_key, version)` on `stream` and its decoded answer (at most
/// `answer_bytes_max`), checked to answer `correlation_id`.
pub async fn call(
    stream: &mut PeerStream,
    correlation_id: i32,
    (api_key, version): (ApiKey, i16),
    request: RequestKind,
    client_id: &'static str,
    answer_bytes_max: usize,
) -> Result<ResponseKind, String> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(client_id)));
    let frame = protocol::encode_request(&header, &request)?;
    let body = exchange_frame(stream, &frame, answer_bytes_max)
        .await
        .map_err(|e| format!("{api_key:?}: {e}"))?;
    let (header, response) =
        protocol::decode_response(api_key, version, body).map_err(|e| e.to_string())?;
    if header.correlation_id != correlation_id {
        return Err(format!("correlation id {} for {correlation_id}", header.correlation_id));
    }
    Ok(response)
}

/// Inter-broker connections kept for one caller's requests (one request at a time on each),
/// at most `idle_max` idle per broker.
pub struct Pool {
    idle: std::cell::RefCell<std::collections::HashMap<i32, Vec<PeerStream>>>,
    correlation: std::cell::Cell<i32>,
    idle_max: usize,
    client_id: &'static str,
}

impl Pool {
    pub fn new(client_id: &'static str, idle_max: usize) -> Self {
        Pool {
            idle: std::cell::RefCell::new(std::collections::HashMap::new()),
            correlation: std::cell::Cell::new(0),
            idle_max,
            client_id,
        }
    }

    /// One request to broker `broker` at `host:port` on a kept connection (or a new one),
    /// within `timeout`; the connection is kept again only after a whole answer.
    pub async fn call(
        &self,
        (broker, host, port): (i32, &str, u16),
        api: (ApiKey, i16),
        request: RequestKind,
        answer_bytes_max: usize,
        timeout: Duration,
    ) -> Result<ResponseKind, String> {
        let correlation = self.correlation.get().wrapping_add(1);
        self.correlation.set(correlation);
        let exchange = async {
            let kept = self.idle.borrow_mut().get_mut(&broker).and_then(Vec::pop);
            let mut stream = match kept {
                Some(stream) => stream,
                None => connect(host, port, timeout, self.client_id).await?,
            };
            let answer =
                call(&mut stream, correlation, api, request, self.client_id, answer_bytes_max)
                    .await?;
            let mut idle = self.idle.borrow_mut();
            let streams = idle.entry(broker).or_default();
            if streams.len() < self.idle_max {
                streams.push(stream);
            }
            Ok(answer)
        };
        futures_lite::future::or(exchange, async {
            shard::runtime::sleep(timeout).await;
            Err(format!("no {:?} answer from broker {broker} in {timeout:?}", api.0))
        })
        .await
    }
}
