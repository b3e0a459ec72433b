//! The controller listener's security (issue #18), as its protocol in
//! `listener.security.protocol.map` asks: TLS (tokio-rustls; the same keystore and truststore
//! as the Kafka listeners, and the other node's certificate checked for the host it is known
//! by), then a SASL PLAIN login as the controller protocol's first message
//! (`Request::Authenticate`, answered `Response::Authenticated`), as `sasl.jaas.config`'s
//! `username`. A controller accepts only its own login and `super.users` among the JAAS
//! users: the controller port serves brokers and controllers, never clients. A connection
//! whose TLS or login fails, or that sends anything before logging in, is closed with a
//! logged reason.
//!
//! The settings are the process's (`configure`, once at startup); without it (in-process
//! tests) connections are plain TCP with no login.
//! Runs on: the controller thread (tokio).

use super::protocol::{self, Request, Response};
use crate::config::security::Secret;
use crate::config::BrokerConfig;
use rustls::pki_types::ServerName;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How long a connection may take to finish TLS and its login.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

struct Settings {
    client_tls: Option<Arc<rustls::ClientConfig>>,
    server_tls: Option<Arc<rustls::ServerConfig>>,
    /// This node's login to other controllers.
    login: Option<(String, Secret)>,
    /// SASL on this node's controller listener: the PLAIN users that may log in (this node's
    /// own login and `super.users`), with their passwords.
    accepted: Option<BTreeMap<String, String>>,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Sets the controller listener's security for this process; the first call wins.
pub fn configure(config: &BrokerConfig) -> Result<(), String> {
    let security = &config.controller_security;
    let client_tls = security.tls.as_ref().map(crate::config::tls::client_config).transpose()?;
    let server_tls = match &security.tls {
        // SSL without SASL: the certificate is the only credential, so controllers and
        // brokers must present one the cluster's CA signed. SASL_SSL: the login is.
        Some(tls) => {
            let mut tls = tls.clone();
            if security.login.is_none() {
                tls.client_auth = crate::config::security::ClientAuth::Required;
            }
            Some(crate::config::tls::server_config(&tls)?)
        }
        None => None,
    };
    let accepted = security.login.as_ref().map(|(own, _)| {
        config
            .controller_users
            .iter()
            .filter(|(user, _)| {
                *user == own
                    || config.authorizer.super_users.iter().any(|s| *s == format!("User:{user}"))
            })
            .map(|(user, password)| (user.clone(), password.clone()))
            .collect()
    });
    let _ =
        SETTINGS.set(Settings { client_tls, server_tls, login: security.login.clone(), accepted });
    Ok(())
}

/// A controller connection: plain TCP or TLS over it (either end).
pub enum ControllerStream {
    Plain(TcpStream),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl AsyncRead for ControllerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ControllerStream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            ControllerStream::Client(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
            ControllerStream::Server(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ControllerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ControllerStream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            ControllerStream::Client(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
            ControllerStream::Server(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ControllerStream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            ControllerStream::Client(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
            ControllerStream::Server(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ControllerStream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            ControllerStream::Client(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
            ControllerStream::Server(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The client side: TLS to `address` (`host:port`) and the login, as configured.
pub async fn secure_client(stream: TcpStream, address: &str) -> io::Result<ControllerStream> {
    let Some(settings) = SETTINGS.get() else { return Ok(ControllerStream::Plain(stream)) };
    let securing = async {
        let mut stream = match &settings.client_tls {
            None => ControllerStream::Plain(stream),
            Some(config) => {
                let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name = ServerName::try_from(host.to_string()).map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}"))
                })?;
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, stream)
                    .await
                    .map_err(|e| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("TLS handshake with {address}: {e}"),
                        )
                    })?;
                ControllerStream::Client(Box::new(tls))
            }
        };
        if let Some((user, password)) = &settings.login {
            let request = Request::Authenticate {
                mechanism: "PLAIN".into(),
                user: user.clone(),
                password: password.clone(),
            };
            protocol::write(&mut stream, &request).await?;
            match protocol::read::<Response, _>(&mut stream).await? {
                Some(Response::Authenticated(Ok(()))) => {}
                Some(Response::Authenticated(Err(why))) => {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!("logging in to {address} as {user}: {why}"),
                    ))
                }
                other => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("logging in to {address}: answered {other:?}"),
                    ))
                }
            }
        }
        Ok(stream)
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, securing).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("securing the connection to {address}: not done in time"),
        )),
    }
}

/// Whether this node's controller listener requires a login (which then proves a
/// connection is of the cluster, `admission`).
pub fn requires_login() -> bool {
    SETTINGS.get().is_some_and(|settings| settings.accepted.is_some())
}

/// The server side: TLS and the login, as configured; `Err` closes the connection.
pub async fn secure_server(
    stream: TcpStream,
    peer: SocketAddr,
) -> Result<ControllerStream, String> {
    let Some(settings) = SETTINGS.get() else { return Ok(ControllerStream::Plain(stream)) };
    let securing = async {
        let mut stream = match &settings.server_tls {
            None => ControllerStream::Plain(stream),
            Some(config) => {
                let tls = tokio_rustls::TlsAcceptor::from(config.clone())
                    .accept(stream)
                    .await
                    .map_err(|e| format!("TLS handshake: {e}"))?;
                ControllerStream::Server(Box::new(tls))
            }
        };
        let Some(accepted) = &settings.accepted else { return Ok(stream) };
        // Nothing large is read before the login (`admission`).
        let limit = super::admission::UNPROVEN_FRAME_BYTES_MAX;
        let first: Option<Request> = match protocol::read_length(&mut stream, limit).await {
            Ok(Some(length)) => Some(
                protocol::read_payload(&mut stream, length)
                    .await
                    .map_err(|e| format!("reading the login: {e}"))?,
            ),
            Ok(None) => None,
            Err(error) => return Err(format!("reading the login: {error}")),
        };
        let verdict = match &first {
            Some(Request::Authenticate { mechanism, user, password }) if mechanism == "PLAIN" => {
                match accepted.get(user) {
                    Some(expected)
                        if crate::sasl::equal_in_constant_time(
                            expected.as_bytes(),
                            password.0.as_bytes(),
                        ) =>
                    {
                        Ok(user.clone())
                    }
                    _ => Err(format!(
                        "user {user:?}: wrong password, or not this node's login nor a super user"
                    )),
                }
            }
            Some(Request::Authenticate { mechanism, .. }) => {
                Err(format!("mechanism {mechanism:?}: PLAIN only"))
            }
            Some(_) => Err("a request before the login".to_string()),
            None => Err("closed before the login".to_string()),
        };
        let answer = Response::Authenticated(verdict.clone().map(drop));
        let _ = protocol::write(&mut stream, &answer).await;
        let user = verdict?;
        tracing::debug!(%peer, %user, "controller connection logged in");
        Ok(stream)
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, securing).await {
        Ok(result) => result,
        Err(_) => Err("TLS and login not done in time".to_string()),
    }
}
