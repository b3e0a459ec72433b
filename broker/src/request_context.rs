//! `RequestContext`: what a handler knows about the request beyond its body: the connection
//! it came on, the client, the listener, who the client is (the principal), and the API
//! version. Authentication (SASL, mTLS) sets the principal and ACL checks read it here.
//! References: Redpanda `request_context.h`; Kafka `RequestContext`.

use crate::sasl::scram::ScramExchange;
use kafka_protocol::messages::ApiKey;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;

/// Who sent a request (Kafka's `KafkaPrincipal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// No authentication on this listener (Kafka's `User:ANONYMOUS`).
    Anonymous,
    User(String),
}

impl Principal {
    /// The name quotas and ACLs know the principal by (Kafka's `ANONYMOUS` when none).
    pub fn name(&self) -> &str {
        match self {
            Principal::Anonymous => "ANONYMOUS",
            Principal::User(name) => name,
        }
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Principal::Anonymous => f.write_str("User:ANONYMOUS"),
            Principal::User(name) => write!(f, "User:{name}"),
        }
    }
}

/// Where a connection is in its SASL authentication (issue #18).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not a SASL listener: nothing to do, SASL requests are out of place.
    NotSasl,
    /// Waiting for SaslHandshake.
    Handshake,
    /// The mechanism is chosen; waiting for SaslAuthenticate.
    Authenticate(String),
    /// SCRAM: the server's first message was sent; waiting for the client's final one.
    ScramFinal(Box<ScramExchange>),
    Authenticated,
    /// Authentication failed: the connection closes once the answer is written.
    Failed,
}

/// A connection's authentication: its SASL step and its principal. On a SASL listener it
/// starts at `Handshake`: only ApiVersions, SaslHandshake and SaslAuthenticate may run until
/// `Authenticated` (`net::connection` closes the connection otherwise); the two SASL requests
/// are barriers, so the requests after them see the new principal.
///
/// Re-authentication (KIP-368): an authenticated connection may run SaslHandshake and
/// SaslAuthenticate again, with the same mechanism, and must end as the same user; the
/// connection stays authenticated meanwhile. With `connections.max.reauth.ms` set, a session
/// expires that long after its authentication: past it, only ApiVersions and the SASL requests
/// are served (anything else closes the connection).
#[derive(Debug)]
pub struct Session {
    step: RefCell<Step>,
    principal: RefCell<Principal>,
    /// The mechanism and user of the first authentication (re-authentication must match).
    first: RefCell<Option<(String, String)>>,
    /// When the session expires (`connections.max.reauth.ms` after its authentication).
    expires: Cell<Option<std::time::Instant>>,
}

/// Why a re-authentication is refused.
pub const REAUTH_CHANGED: &str = "Cannot change principals or mechanisms during re-authentication";

impl Session {
    /// A session on a listener: `sasl` for SASL_PLAINTEXT and SASL_SSL ones, and the
    /// principal the transport established (an mTLS subject, or anonymous).
    pub fn new(sasl: bool, principal: Principal) -> Self {
        let step = if sasl { Step::Handshake } else { Step::NotSasl };
        Session {
            step: RefCell::new(step),
            principal: RefCell::new(principal),
            first: RefCell::new(None),
            expires: Cell::new(None),
        }
    }

    pub fn step(&self) -> Step {
        self.step.borrow().clone()
    }

    pub fn principal(&self) -> Principal {
        self.principal.borrow().clone()
    }

    /// Requests other than ApiVersions and the SASL ones may run: not a SASL listener, or
    /// authenticated (also while re-authenticating).
    pub fn authenticated(&self) -> bool {
        match *self.step.borrow() {
            Step::NotSasl | Step::Authenticated => true,
            Step::Authenticate(_) | Step::ScramFinal(_) => self.first.borrow().is_some(),
            Step::Handshake | Step::Failed => false,
        }
    }

    /// The session's lifetime has passed (`connections.max.reauth.ms`) without a
    /// re-authentication.
    pub fn expired(&self, now: std::time::Instant) -> bool {
        self.expires.get().is_some_and(|expires| now >= expires)
    }

    pub fn failed(&self) -> bool {
        *self.step.borrow() == Step::Failed
    }

    /// SaslHandshake may start (again, to re-authenticate, once authenticated).
    pub fn may_handshake(&self) -> bool {
        matches!(*self.step.borrow(), Step::Handshake | Step::Authenticated)
    }

    /// SaslHandshake: `mechanism` is enabled (the next step is its SaslAuthenticate). A
    /// re-authentication must use the first one: false, and the session fails, otherwise.
    pub fn choose(&self, mechanism: &str) -> bool {
        let same = self.first.borrow().as_ref().is_none_or(|(first, _)| first == mechanism);
        *self.step.borrow_mut() =
            if same { Step::Authenticate(mechanism.to_string()) } else { Step::Failed };
        same
    }

    /// SCRAM's first round trip is done: its final message comes next.
    pub fn continue_scram(&self, exchange: ScramExchange) {
        *self.step.borrow_mut() = Step::ScramFinal(Box::new(exchange));
    }

    /// `user` authenticated with `mechanism`, for `lifetime` (none: the session never
    /// expires). A re-authentication as another user fails the session: false.
    pub fn succeed(
        &self,
        mechanism: &str,
        user: &str,
        lifetime: Option<std::time::Duration>,
    ) -> bool {
        let mut first = self.first.borrow_mut();
        if first.as_ref().is_some_and(|(m, u)| m != mechanism || u != user) {
            *self.step.borrow_mut() = Step::Failed;
            return false;
        }
        first.get_or_insert_with(|| (mechanism.to_string(), user.to_string()));
        *self.step.borrow_mut() = Step::Authenticated;
        *self.principal.borrow_mut() = Principal::User(user.to_string());
        self.expires.set(lifetime.map(|lifetime| std::time::Instant::now() + lifetime));
        true
    }

    /// Whether this authentication is a re-authentication.
    pub fn reauthenticating(&self) -> bool {
        self.first.borrow().is_some()
    }

    pub fn fail(&self) {
        *self.step.borrow_mut() = Step::Failed;
    }
}

/// The plaintext listener's name (Kafka's default listener name).
pub const PLAINTEXT_LISTENER: &str = "PLAINTEXT";

#[derive(Debug, Clone)]
pub struct RequestContext {
    /// Unique per connection on this shard's listener, for logs.
    pub connection_id: u64,
    pub client_id: Option<String>,
    pub client_address: SocketAddr,
    /// The name of the listener the connection came in on (`PLAINTEXT`, `SSL`, ...).
    pub listener: Rc<str>,
    pub principal: Principal,
    /// The connection's authentication (SaslHandshake and SaslAuthenticate move it on).
    pub session: Rc<Session>,
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    /// Tells the connection when the next request may start (pipelining; see `Admission`).
    pub admission: Admission,
    /// Set by a handler that answers nothing (acks=0) but wants the connection closed once
    /// the request is done: Kafka's way of telling an acks=0 producer that it failed.
    pub hang_up: Cell<bool>,
    /// The connection's mute (KIP-219): no request of it starts before this instant. Shared
    /// with the connection, so a handler's throttle holds back the next request at once.
    pub muted_until: Rc<Cell<Option<std::time::Instant>>>,
}

impl RequestContext {
    /// The client is over its quota (`services::quotas`): no further request of this
    /// connection starts for `throttle_ms` from now (the latest mute wins), whatever the
    /// client does with the throttle time its answer carries.
    pub fn throttle(&self, throttle_ms: i32) {
        if throttle_ms <= 0 {
            return;
        }
        let until = std::time::Instant::now()
            + std::time::Duration::from_millis(u64::from(throttle_ms.unsigned_abs()));
        if self.muted_until.get().is_none_or(|current| current < until) {
            self.muted_until.set(Some(until));
        }
    }
}

/// When a pipelined request lets the connection start the next one: a Produce once every
/// partition's records took their place in the partition's append order (so the next request's
/// records for a partition come after them), any other request once it completes. Set once.
#[derive(Clone, Default)]
pub struct Admission(Rc<AdmissionState>);

#[derive(Default)]
struct AdmissionState {
    admitted: Cell<bool>,
    event: event_listener::Event,
}

impl Admission {
    pub fn admit(&self) {
        if !self.0.admitted.replace(true) {
            self.0.event.notify(usize::MAX);
        }
    }

    pub fn is_admitted(&self) -> bool {
        self.0.admitted.get()
    }

    pub async fn admitted(&self) {
        while !self.is_admitted() {
            let listener = self.0.event.listen();
            if self.is_admitted() {
                return;
            }
            listener.await;
        }
    }
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Admission({})", self.is_admitted())
    }
}

impl RequestContext {
    /// The client host as Kafka reports it (`/127.0.0.1`), for DescribeGroups.
    pub fn client_host(&self) -> String {
        format!("/{}", self.client_address.ip())
    }

    pub fn client_id(&self) -> &str {
        self.client_id.as_deref().unwrap_or_default()
    }

    /// A context for a request made inside the broker or by a test (no connection).
    pub fn internal(api_key: ApiKey, api_version: i16) -> Self {
        RequestContext {
            connection_id: 0,
            client_id: Some("strata-internal".into()),
            client_address: SocketAddr::from(([127, 0, 0, 1], 0)),
            listener: Rc::from(PLAINTEXT_LISTENER),
            principal: Principal::Anonymous,
            session: Rc::new(Session::new(false, Principal::Anonymous)),
            api_key,
            api_version,
            correlation_id: 0,
            admission: Admission::default(),
            hang_up: Cell::new(false),
            muted_until: Rc::new(Cell::new(None)),
        }
    }
}
