//! One client connection: reads size-prefixed requests, answers each in order. On an SSL
//! listener the TLS handshake comes first (bounded by `socket.request.frame.timeout.ms`; a
//! failed one closes the connection with a log line), and the client certificate's subject,
//! when there is one, is the connection's principal.
//!
//! Pipelining: Kafka clients keep several requests in flight on a connection (5 in the Java
//! client, more in librdkafka). Up to `PIPELINED_REQUESTS_MAX` run at once, and their answers
//! are written strictly in request order. Only Produce and Fetch overlap; every other request
//! is a barrier (`Flow`), so pipelining is invisible to clients: Kafka itself handles one
//! request per connection at a time. A Produce lets the next request start only once its
//! records took their places in their partitions' append orders, so two produces for one
//! partition on one connection append in request order (an idempotent producer's in-flight
//! batches keep their sequence order), and their acks=all syncs are shared (group commit
//! across requests). An acks=0 Produce takes no answer slot.
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

use super::budget::{RequestBudget, Reservation};
use super::limits::ConnectionSlot;
use crate::api;
use crate::error::{error_code, BrokerError};
use crate::handlers;
use crate::node::Node;
use crate::request_context::{Admission, Principal, RequestContext, Session};
use crate::stats::Closed;
use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use shard::io::Storage;
use shard::runtime::net::TcpStream;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// A client listener as its connections see it: its name, the TLS server config of an SSL
/// listener, and whether clients authenticate with SASL first.
pub struct ListenerInfo {
    pub name: Rc<str>,
    pub tls: Option<std::sync::Arc<super::tls::TlsServer>>,
    /// SASL_PLAINTEXT or SASL_SSL: clients authenticate before anything else.
    pub sasl: bool,
}

/// The listener a connection came in on and its authentication (mTLS, SASL), for its
/// requests' contexts.
struct Who {
    listener: Rc<str>,
    session: Rc<Session>,
}

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
    pub listener: Rc<ListenerInfo>,
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
    let ending = match connection.listener.tls.clone() {
        None => {
            // Plaintext: request bodies are read from the socket without zero-filling
            // (`read_body`).
            let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
            serve_requests(&connection, &mut stream, Some(fd), Principal::Anonymous).await
        }
        Some(tls) => {
            let deadline = Instant::now() + connection.timeouts.frame;
            let acceptor = futures_rustls::TlsAcceptor::from(tls.current());
            match before(deadline, acceptor.accept(stream)).await {
                Some(Ok(mut stream)) => {
                    let principal = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .and_then(super::tls::subject_name)
                        .map_or(Principal::Anonymous, Principal::User);
                    tracing::debug!(address = %connection.peer.address, %principal, "TLS handshake done");
                    serve_requests(&connection, &mut stream, None, principal).await
                }
                Some(Err(error)) => Ending::Failed(format!("TLS handshake failed: {error}")),
                None => Ending::Closed(Closed::FrameDeadline),
            }
        }
    };
    node.stats.connection_closed();
    // Its share sessions end with it: what their members hold is released now.
    node.share_sessions_closed(connection.peer.connection_id).await;
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

/// Reads the first byte of the next request, waiting at most the idle timeout (counted while
/// none of the connection's requests is in progress).
async fn first_byte(
    stream: &mut (impl futures_lite::AsyncRead + Unpin),
    idle: Option<Duration>,
    pipeline: &Pipeline,
) -> Result<u8, Ending> {
    let mut byte = [0u8; 1];
    let read = match idle {
        Some(idle) => {
            let mut read = std::pin::pin!(stream.read(&mut byte));
            loop {
                match before(Instant::now() + idle, &mut read).await {
                    Some(read) => break read,
                    None if pipeline.busy() => continue,
                    None => return Err(Ending::Closed(Closed::Idle)),
                }
            }
        }
        None => stream.read(&mut byte).await,
    };
    match read {
        Ok(0) => Err(Ending::ClientClosed),
        Ok(_) => Ok(byte[0]),
        // A TLS client may close without close_notify between requests: still a close.
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            Err(Ending::ClientClosed)
        }
        Err(error) => Err(Ending::Failed(format!("read failed: {error}"))),
    }
}

/// Fills `buffer` before `deadline`.
/// A request's body, into a new buffer: on a plaintext connection (`plain_fd`) straight from
/// the socket into the buffer's spare capacity, never zero-filled first (zeroing every
/// request's frame cost 3.5% of a shard's samples producing 100-byte messages); through TLS
/// into a zeroed buffer.
async fn read_body(
    stream: &mut (impl futures_lite::AsyncRead + Unpin),
    plain_fd: Option<std::os::fd::RawFd>,
    len: usize,
) -> std::io::Result<BytesMut> {
    match plain_fd {
        Some(fd) => shard::runtime::net::read_exact_to_new_from(fd, stream, len).await,
        None => {
            let mut body = BytesMut::zeroed(len);
            stream.read_exact(&mut body).await?;
            Ok(body)
        }
    }
}

async fn read_by(
    stream: &mut (impl futures_lite::AsyncRead + Unpin),
    buffer: &mut [u8],
    deadline: Instant,
) -> Result<(), Ending> {
    match before(deadline, stream.read_exact(buffer)).await {
        None => Err(Ending::Closed(Closed::FrameDeadline)),
        Some(Ok(())) => Ok(()),
        Some(Err(error)) => Err(Ending::Failed(format!("read failed mid-frame: {error}"))),
    }
}

/// Requests a connection has started and not yet answered (or, for acks=0 produces, finished).
/// Kafka clients keep up to `max.in.flight.requests.per.connection` in flight (5 in the Java
/// client; librdkafka allows far more); past this many the connection is not read, and its
/// requests wait in the socket (back-pressure, with `queued.max.request.bytes` bounding the
/// bytes held). It bounds small requests (the bytes bound below holds large ones): 1,024
/// requests of 16 KiB are the 16 MiB of `PIPELINED_BYTES_MAX`. Measured (librdkafka, one
/// producer, 1 KiB messages, `batch.size=16384 linger.ms=5`, acks=all, which sends one ~16 KiB
/// batch per request, 2 alternating rounds): 64 gave 165-186 MB/s, 256 227-260, 1,024 301-323
/// (every request in progress waits for a sync, so more of them share each one).
pub const PIPELINED_REQUESTS_MAX: usize = 1024;
/// A connection starts another request only while the frames of its requests in progress
/// (not yet completed) hold fewer bytes than this: small requests overlap up to
/// `PIPELINED_REQUESTS_MAX`, ~1 MB ones up to about 64. Measured (librdkafka defaults, acks=all,
/// 3 alternating rounds): 2 MiB gave 360-411 MB/s, 16 MiB 487-518 MB/s (more syncs shared).
/// With 4 MiB chunk writes for large batches (`LARGE_WRITE_CHUNK_BYTES`, whose write window
/// alone is 16 MiB per partition), 8 GB rounds, medians: 16 MiB 858 MB/s, 32 MiB 917, 64 MiB
/// 1,004 (issue #13; BENCHMARKS.md). The shard's `queued.max.request.bytes` share still bounds
/// all its connections together.
pub const PIPELINED_BYTES_MAX: usize = 64 << 20;

/// How a request is ordered against the requests around it on its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Produce (with a response) and Fetch: may overlap the requests before and after it
    /// (a Fetch overlaps no other Fetch: see `start`).
    /// A Produce lets the next request start only once its records took their places in
    /// their partitions' append orders (`Admission`), so appends keep the request order.
    Pipelined,
    /// An acks=0 Produce: as `Pipelined`, and no response is written.
    NoResponse,
    /// Every other request: starts once everything before it completed, and the next starts
    /// once it completed, as if requests were handled one at a time (Metadata after
    /// CreateTopics, OffsetFetch after OffsetCommit, InitProducerId, later SASL).
    Barrier,
}

fn flow_of(request: &RequestKind) -> Flow {
    match request {
        RequestKind::Produce(produce) if produce.acks == 0 => Flow::NoResponse,
        RequestKind::Produce(_) | RequestKind::Fetch(_) => Flow::Pipelined,
        _ => Flow::Barrier,
    }
}

/// A response's bytes, or why the connection must close instead.
type Output = Result<Option<Vec<Bytes>>, Ending>;

/// A started request whose response is still to be written, in request order.
struct Answer {
    task: shard::runtime::Task<Output>,
    /// The frame's bytes stay reserved until its answer is written.
    _reservation: Reservation,
}

/// A connection's requests in progress (see `PIPELINED_REQUESTS_MAX` and `Flow`).
#[derive(Default)]
struct Pipeline {
    answers: RefCell<VecDeque<Answer>>,
    /// Started, not yet answered (or finished, for acks=0).
    outstanding: Cell<usize>,
    /// Started, not yet completed.
    running: Cell<usize>,
    /// Frame bytes of the requests started and not yet completed.
    running_bytes: Cell<usize>,
    /// Fetches started and not yet completed (at most one: see `start`).
    fetches_running: Cell<usize>,
    /// No more requests will be started.
    reading_done: Cell<bool>,
    /// Writing a response failed (or one could not be encoded): reading stops.
    failed: Cell<bool>,
    /// A client over its quota: nothing more is read before this (KIP-219's muted channel).
    muted_until: Rc<Cell<Option<Instant>>>,
    /// A request without an answer (acks=0) ended the connection: reading stops, and the
    /// connection ends with this once every started request is done.
    hung_up: RefCell<Option<Ending>>,
    changed: event_listener::Event,
}

impl Pipeline {
    fn notify(&self) {
        self.changed.notify(usize::MAX);
    }

    async fn until(&self, condition: impl Fn(&Self) -> bool) {
        loop {
            if condition(self) {
                return;
            }
            let listener = self.changed.listen();
            if condition(self) {
                return;
            }
            listener.await;
        }
    }

    fn busy(&self) -> bool {
        self.outstanding.get() > 0
    }
}

/// Counts a request task (its frame's bytes, and whether it is a Fetch) as running until
/// dropped (when it completes).
struct Running {
    pipeline: Rc<Pipeline>,
    flow: Flow,
    bytes: usize,
    fetch: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        let pipeline = &self.pipeline;
        pipeline.running.set(pipeline.running.get() - 1);
        pipeline.running_bytes.set(pipeline.running_bytes.get() - self.bytes);
        if self.fetch {
            pipeline.fetches_running.set(pipeline.fetches_running.get() - 1);
        }
        if self.flow == Flow::NoResponse {
            pipeline.outstanding.set(pipeline.outstanding.get() - 1);
        }
        pipeline.notify();
    }
}

/// Serves the connection: one side reads and starts requests, the other writes their answers
/// in request order; it ends once every started request was answered.
async fn serve_requests<S: Storage>(
    connection: &Connection<S>,
    stream: &mut (impl futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin),
    plain_fd: Option<std::os::fd::RawFd>,
    principal: Principal,
) -> Ending {
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let session = Rc::new(Session::new(connection.listener.sasl, principal));
    let who = Who { listener: connection.listener.name.clone(), session };
    let pipeline = Rc::new(Pipeline::default());
    let reading = async {
        let ending = futures_lite::future::or(
            read_requests(connection, &who, &mut reader, plain_fd, &pipeline),
            async {
                pipeline.until(|pipeline| pipeline.failed.get()).await;
                Ending::Shutdown // replaced by the writer's reason
            },
        )
        .await;
        pipeline.reading_done.set(true);
        pipeline.notify();
        ending
    };
    let (read_ending, written) =
        futures_lite::future::zip(reading, write_answers(connection, &mut writer, &pipeline)).await;
    match written {
        Err(ending) => ending,
        Ok(()) => read_ending,
    }
}

/// Writes the answers in request order until reading stopped and every answer was written.
/// After a failure it still waits for every started request (a request is never cancelled
/// halfway: an append in progress completes), writing nothing more.
async fn write_answers<S: Storage>(
    connection: &Connection<S>,
    writer: &mut (impl futures_lite::AsyncWrite + Unpin),
    pipeline: &Pipeline,
) -> Result<(), Ending> {
    let mut failure = None;
    loop {
        pipeline
            .until(|pipeline| pipeline.reading_done.get() || !pipeline.answers.borrow().is_empty())
            .await;
        let next = pipeline.answers.borrow_mut().pop_front();
        let Some(answer) = next else {
            // Reading stopped and nothing is left to answer; acks=0 produces may still run.
            pipeline.until(|pipeline| pipeline.running.get() == 0).await;
            return match failure.or_else(|| pipeline.hung_up.borrow_mut().take()) {
                Some(ending) => Err(ending),
                None => Ok(()),
            };
        };
        let Answer { task, _reservation: reservation } = answer;
        let output = task.await;
        if failure.is_none() {
            match output {
                Ok(Some(chunks)) => match write_chunks(writer, &chunks).await {
                    Ok(written) => connection.node.stats.count_bytes_out(written),
                    Err(ending) => failure = Some(ending),
                },
                Ok(None) => {}
                Err(ending) => failure = Some(ending),
            }
            if failure.is_some() {
                pipeline.failed.set(true);
            }
        }
        drop(reservation);
        pipeline.outstanding.set(pipeline.outstanding.get() - 1);
        pipeline.notify();
    }
}

async fn read_requests<S: Storage>(
    connection: &Connection<S>,
    who: &Who,
    stream: &mut (impl futures_lite::AsyncRead + Unpin),
    plain_fd: Option<std::os::fd::RawFd>,
    pipeline: &Rc<Pipeline>,
) -> Ending {
    let sasl_limit = connection.node.config.sasl.as_ref().map(|sasl| sasl.max_receive_bytes);
    loop {
        if who.session.failed() {
            // Authentication failed: the answer is written, then the connection waits
            // `connection.failed.authentication.delay.ms` and closes.
            pipeline.until(|pipeline| pipeline.outstanding.get() == 0).await;
            let delay =
                connection.node.config.sasl.as_ref().map_or(0, |sasl| sasl.failure_delay_ms);
            shard::runtime::sleep(Duration::from_millis(delay)).await;
            return Ending::Failed("SASL authentication failed".into());
        }
        // Before authentication a frame is bounded by `sasl.server.max.receive.size`.
        let limit = match sasl_limit {
            Some(limit) if !who.session.authenticated() => limit,
            _ => connection.node.config.request_bytes_max,
        };
        pipeline
            .until(|pipeline| {
                pipeline.outstanding.get() < PIPELINED_REQUESTS_MAX
                    && pipeline.running_bytes.get() < PIPELINED_BYTES_MAX
            })
            .await;
        if crate::shutdown::stopping() {
            return Ending::Shutdown; // answers everything it read; takes no new requests
        }
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        match first_byte(stream, connection.timeouts.idle, pipeline).await {
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
        let frame = match before(deadline, read_body(stream, plain_fd, len)).await {
            None => return Ending::Closed(Closed::FrameDeadline),
            Some(Ok(frame)) => frame,
            Some(Err(error)) => return Ending::Failed(format!("read failed mid-frame: {error}")),
        };
        // Throttled (KIP-219): the answer said how long, and no request starts before it has
        // passed. Checked here, not before reading: the reader is usually already waiting for
        // the next request when a running one sets the throttle.
        if let Some(until) = pipeline.muted_until.get() {
            let left = until.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                shard::runtime::sleep(left).await;
            }
        }
        if let Err(ending) = start(connection, who, pipeline, frame.freeze(), reservation).await {
            return ending;
        }
    }
}

/// Decodes one request frame and starts its handler (see `Flow` for when).
async fn start<S: Storage>(
    connection: &Connection<S>,
    who: &Who,
    pipeline: &Rc<Pipeline>,
    frame: Bytes,
    reservation: Reservation,
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
        return refuse_version(pipeline, reservation, api_key, version, correlation_id).await;
    }
    check_session(who, api_key)?;
    let context = RequestContext {
        connection_id: connection.peer.connection_id,
        client_id: header.client_id.as_ref().map(|id| id.to_string()),
        client_address: connection.peer.address,
        listener: who.listener.clone(),
        principal: who.session.principal(),
        session: who.session.clone(),
        api_key,
        api_version: version,
        correlation_id,
        admission: Admission::default(),
        hang_up: std::cell::Cell::new(false),
        muted_until: pipeline.muted_until.clone(),
    };
    let body = protocol::decode_body(api_key, version, request.body)
        .map_err(|e| Ending::Failed(e.to_string()))?;
    // The header's strings are slices of the frame: not kept while the request runs, so a
    // produce's records may be the frame's only slice (`handlers::produce::detach_from_frame`).
    drop(request.header);
    let flow = flow_of(&body);
    let fetch = api_key == ApiKey::Fetch;
    if flow == Flow::Barrier {
        pipeline.until(|pipeline| pipeline.running.get() == 0).await;
    }
    if fetch {
        // One Fetch at a time per connection, as clients send them: a Fetch's answer (up to
        // its max bytes) is held outside the request budget, so pipelined fetches would
        // multiply it. A Fetch still overlaps the produces around it.
        pipeline.until(|pipeline| pipeline.fetches_running.get() == 0).await;
    }
    let admission = context.admission.clone();
    let work = handle_request(node.clone(), context, body);
    spawn_request(pipeline, flow, fetch, reservation, work);
    if flow != Flow::Pipelined || api_key == ApiKey::Produce {
        admission.admitted().await;
    }
    Ok(())
}

/// A request of a version this broker does not support: an ApiVersions gets the v0 answer
/// with UNSUPPORTED_VERSION (KIP-511), any other API closes the connection.
async fn refuse_version(
    pipeline: &Rc<Pipeline>,
    reservation: Reservation,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<(), Ending> {
    if api_key == ApiKey::ApiVersions {
        let refused = error_code(&BrokerError::UnsupportedVersion("ApiVersions", version));
        let response = ResponseKind::ApiVersions(handlers::api_versions::response(
            refused,
            &api::advertised(),
        ));
        let chunks = encode(ApiKey::ApiVersions, 0, correlation_id, response);
        pipeline.until(|pipeline| pipeline.running.get() == 0).await;
        let work = async move { chunks.map(Some) };
        spawn_request(pipeline, Flow::Barrier, false, reservation, work);
        return Ok(());
    }
    Err(Ending::Failed(format!("unsupported {api_key:?} version {version}")))
}

/// On a SASL listener, only ApiVersions and SASL requests come before authentication, and
/// after the session expired.
fn check_session(who: &Who, api_key: ApiKey) -> Result<(), Ending> {
    if !who.session.authenticated()
        && !matches!(
            api_key,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        )
    {
        return Err(Ending::Failed(format!("{api_key:?} before SASL authentication")));
    }
    if who.session.expired(Instant::now())
        && !matches!(
            api_key,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        )
    {
        // KIP-368: past `connections.max.reauth.ms` without re-authenticating.
        return Err(Ending::Failed(format!("{api_key:?} after the SASL session expired")));
    }
    Ok(())
}

/// A request's task: runs its handler (charged to the request-time quotas), throttles and
/// encodes its answer (none for acks=0).
async fn handle_request<S: Storage>(
    node: Rc<Node<S>>,
    context: RequestContext,
    body: RequestKind,
) -> Output {
    let started = Instant::now();
    let (api_key, version, correlation_id) =
        (context.api_key, context.api_version, context.correlation_id);
    let _in_progress = node.request_started();
    // Request-time quotas (KIP-124): a request's handler time is charged when any quota
    // is set (ApiVersions and SASL are exempt, as in Kafka).
    let charged = !node.metadata().quotas.is_empty()
        && !matches!(
            api_key,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        );
    let mut response = if charged {
        let (response, spent) =
            crate::services::quotas::timed(api::dispatch(&node, &context, body)).await;
        let throttle_ms = node.quotas.record_time(
            &node.metadata(),
            context.principal.name(),
            context.client_id(),
            spent,
        );
        if throttle_ms > 0 {
            context.throttle(throttle_ms);
        }
        response.map(|response| (response, throttle_ms))
    } else {
        api::dispatch(&node, &context, body).await.map(|response| (response, 0))
    };
    if let Some((response, throttle_ms)) = response.as_mut() {
        if *throttle_ms > 0 {
            api::raise_throttle(response, *throttle_ms);
        }
    }
    let response = response.map(|(response, _)| response);
    context.admission.admit();
    node.stats.record_latency(api_key as i16, started.elapsed().as_micros() as u64);
    if context.hang_up.get() {
        return Err(Ending::Closed(Closed::AcksZeroFailed));
    }
    match response {
        Some(response) => encode(api_key, version, correlation_id, response).map(Some),
        None => Ok(None),
    }
}

/// Starts a request's task and queues its answer (none for acks=0).
fn spawn_request(
    pipeline: &Rc<Pipeline>,
    flow: Flow,
    fetch: bool,
    reservation: Reservation,
    work: impl Future<Output = Output> + 'static,
) {
    let bytes = reservation.bytes() as usize;
    pipeline.running.set(pipeline.running.get() + 1);
    pipeline.running_bytes.set(pipeline.running_bytes.get() + bytes);
    pipeline.fetches_running.set(pipeline.fetches_running.get() + usize::from(fetch));
    pipeline.outstanding.set(pipeline.outstanding.get() + 1);
    let running = Running { pipeline: pipeline.clone(), flow, bytes, fetch };
    let task = shard::runtime::spawn(async move {
        let output = work.await;
        drop(running);
        output
    });
    if flow == Flow::NoResponse {
        // Nothing to write: the task holds its frame's bytes until it completes.
        let pipeline = pipeline.clone();
        shard::runtime::spawn(async move {
            if let Err(ending) = task.await {
                pipeline.hung_up.borrow_mut().get_or_insert(ending);
                pipeline.failed.set(true);
                pipeline.notify();
            }
            drop(reservation);
        })
        .detach();
    } else {
        pipeline.answers.borrow_mut().push_back(Answer { task, _reservation: reservation });
    }
    pipeline.notify();
}

/// Encodes one response; Fetch record batches stay in the buffers they live in
/// (`wire::response_chunks`), not copied into the frame.
fn encode(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: ResponseKind,
) -> Result<Vec<Bytes>, Ending> {
    wire::response_chunks::encode_response_chunks(api_key, version, correlation_id, response)
        .map_err(|e| Ending::Failed(format!("encoding the {api_key:?} v{version} response: {e}")))
}

async fn write_chunks(
    stream: &mut (impl futures_lite::AsyncWrite + Unpin),
    chunks: &[Bytes],
) -> Result<usize, Ending> {
    let mut written = 0;
    for chunk in chunks {
        stream.write_all(chunk).await.map_err(|e| Ending::WriteFailed(e.to_string()))?;
        written += chunk.len();
    }
    // A TLS stream may still hold the last records' ciphertext (a plain one holds nothing).
    stream.flush().await.map_err(|e| Ending::WriteFailed(e.to_string()))?;
    Ok(written)
}
