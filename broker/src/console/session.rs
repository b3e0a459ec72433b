//! Console logins, sessions and the cross-site request checks.
//!
//! A login is required when any client listener is SASL: the user name and password are
//! checked as the broker checks a SASL client (SCRAM against the cluster's credentials, then
//! PLAIN's configured users), and the session acts as `User:<name>`. Without SASL every
//! visitor acts as `User:ANONYMOUS` (ACLs still apply to it).
//! A session is a random 32-byte token in an HttpOnly, SameSite=Strict cookie; the map holds
//! its SHA-256, the principal, a CSRF token (random, 32 bytes), its times, and a fingerprint of
//! the credential it logged in with: a session ends when idle for `console.session.idle.ms`,
//! `console.session.max.ms` after its login, or as soon as its user's credential is altered
//! or deleted.
//! Every POST must come from the console's own origin (`Origin` equal to `http://<Host>`,
//! `Sec-Fetch-Site` same-origin when sent), carry JSON (a form cannot), and, but for the login
//! itself, the session's CSRF token in `X-Strata-Csrf`.

use super::http::{Request, Response};
use super::ConsoleError;
use crate::node::Node;
use crate::request_context::Principal;
use crate::sasl::equal_in_constant_time;
use crate::sasl::scram::{ScramCredential, ScramMechanism};
use base64::Engine;
use serde_json::json;
use shard::io::Storage;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The session cookie's name.
pub const COOKIE: &str = "strata_console";
/// The header carrying the CSRF token.
pub const TOKEN_HEADER: &str = "x-strata-csrf";
/// Most sessions kept (the least recently used goes first).
pub const SESSIONS_MAX: usize = 1024;
/// Most password checks running at once (each is a PBKDF2 of thousands of rounds).
const LOGINS_IN_FLIGHT_MAX: usize = 4;

/// Who a request is from.
#[derive(Debug, Clone)]
pub struct Visitor {
    pub principal: Principal,
    /// The session's key (SHA-256 of its cookie), `None` for a cookieless anonymous read.
    key: Option<Vec<u8>>,
    csrf: String,
}

struct Entry {
    principal: Principal,
    csrf: String,
    created: Instant,
    last_seen: Instant,
    /// What the login was checked against; the session ends when it changes.
    fingerprint: Vec<u8>,
}

#[derive(Default)]
pub struct Sessions {
    entries: RefCell<HashMap<Vec<u8>, Entry>>,
    logins: Cell<usize>,
}

fn random_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn key_of(token: &str) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref().to_vec()
}

/// Whether the console asks for a login: some client listener authenticates with SASL.
pub fn login_required<S: Storage>(node: &Node<S>) -> bool {
    node.config.listeners.iter().any(|listener| listener.sasl)
}

/// The fingerprint of `user`'s credential now (SCRAM's stored keys, or PLAIN's password),
/// `None` when the user has none.
fn fingerprint<S: Storage>(node: &Node<S>, user: &str) -> Option<Vec<u8>> {
    let image = node.metadata();
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut any = false;
    for mechanism in ScramMechanism::ALL {
        if let Some(credential) = image.scram_credential(user, mechanism) {
            context.update(&credential.stored_key);
            any = true;
        }
    }
    if let Some(password) = node.config.sasl.as_ref().and_then(|s| s.plain_users.get(user)) {
        context.update(password.as_bytes());
        any = true;
    }
    any.then(|| context.finish().as_ref().to_vec())
}

/// Refuses a request that is not a same-origin JSON request of the console's own pages.
pub fn same_origin(request: &Request, host: &str) -> Result<(), ConsoleError> {
    let expected = format!("http://{host}");
    match request.header("origin") {
        Some(origin) if origin.eq_ignore_ascii_case(&expected) => {}
        Some(origin) => {
            return Err(ConsoleError::Forbidden(format!("cross-site request from {origin}")))
        }
        None => return Err(ConsoleError::Forbidden("a request without an Origin".into())),
    }
    if request.header("sec-fetch-site").is_some_and(|site| site != "same-origin") {
        return Err(ConsoleError::Forbidden("not a same-origin request".into()));
    }
    let json = request
        .header("content-type")
        .is_some_and(|kind| kind.split(';').next().is_some_and(|k| k.trim() == "application/json"));
    if !json {
        return Err(ConsoleError::Forbidden("the body must be application/json".into()));
    }
    Ok(())
}

impl Sessions {
    /// The visitor of a request: its live session, or an anonymous one when no login is
    /// required. Unauthenticated otherwise.
    pub fn visitor<S: Storage>(
        &self,
        node: &Node<S>,
        request: &Request,
        _peer: SocketAddr,
    ) -> Result<Visitor, ConsoleError> {
        let settings = &node.config.console;
        let now = Instant::now();
        if let Some(token) = request.cookie(COOKIE) {
            let key = key_of(token);
            let mut entries = self.entries.borrow_mut();
            if let Some(entry) = entries.get_mut(&key) {
                let idle = now.duration_since(entry.last_seen)
                    > Duration::from_millis(settings.session_idle_ms);
                let old = now.duration_since(entry.created)
                    > Duration::from_millis(settings.session_max_ms);
                let current = match &entry.principal {
                    Principal::User(user) => fingerprint(node, user).unwrap_or_default(),
                    Principal::Anonymous => Vec::new(),
                };
                let anonymous_but_required =
                    entry.principal == Principal::Anonymous && login_required(node);
                if idle || old || current != entry.fingerprint || anonymous_but_required {
                    entries.remove(&key);
                } else {
                    entry.last_seen = now;
                    let csrf = entry.csrf.clone();
                    return Ok(Visitor {
                        principal: entry.principal.clone(),
                        key: Some(key),
                        csrf,
                    });
                }
            }
        }
        if login_required(node) {
            return Err(ConsoleError::Unauthenticated);
        }
        Ok(Visitor { principal: Principal::Anonymous, key: None, csrf: String::new() })
    }

    /// Refuses a change without the session's CSRF token.
    pub fn check_token(&self, visitor: &Visitor, request: &Request) -> Result<(), ConsoleError> {
        let given = request.header(TOKEN_HEADER).unwrap_or_default();
        if visitor.key.is_none()
            || !equal_in_constant_time(given.as_bytes(), visitor.csrf.as_bytes())
        {
            return Err(ConsoleError::Forbidden("a missing or wrong CSRF token".into()));
        }
        Ok(())
    }

    /// A new session for `principal`; its cookie and CSRF token.
    fn open(&self, principal: Principal, fingerprint: Vec<u8>) -> (String, String) {
        let token = random_token();
        let csrf = random_token();
        let now = Instant::now();
        let mut entries = self.entries.borrow_mut();
        if entries.len() >= SESSIONS_MAX {
            let oldest = entries.iter().min_by_key(|(_, e)| e.last_seen).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        let entry =
            Entry { principal, csrf: csrf.clone(), created: now, last_seen: now, fingerprint };
        entries.insert(key_of(&token), entry);
        (token, csrf)
    }

    fn cookie<S: Storage>(node: &Node<S>, token: &str) -> String {
        let max_age = node.config.console.session_max_ms / 1000;
        format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}")
    }

    /// `GET /api/session`: who the visitor is and its CSRF token; an anonymous visitor
    /// without a session gets one (its cookie) so that it can make changes.
    pub fn describe<S: Storage>(&self, node: &Node<S>, visitor: &Visitor) -> Response {
        let (cookie, csrf) = match visitor.key {
            Some(_) => (None, visitor.csrf.clone()),
            None => {
                let (token, csrf) = self.open(Principal::Anonymous, Vec::new());
                (Some(Self::cookie(node, &token)), csrf)
            }
        };
        let user = match &visitor.principal {
            Principal::User(name) => json!(name),
            Principal::Anonymous => json!(null),
        };
        let mut response = Response::json(
            "200 OK",
            &json!({
                "user": user,
                "login_required": login_required(node),
                "csrf": csrf,
                "node_id": node.node_id().0,
                "cluster_id": node.metadata().cluster_id.to_string(),
            }),
        );
        response.headers.extend(cookie.map(|cookie| ("Set-Cookie", cookie)));
        response
    }

    /// `POST /api/logout`.
    pub fn log_out(&self, visitor: &Visitor) -> Response {
        if let Some(key) = &visitor.key {
            self.entries.borrow_mut().remove(key);
        }
        let mut response = Response::json("200 OK", &json!({ "ok": true }));
        response.headers.push((
            "Set-Cookie",
            format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
        ));
        response
    }

    /// `POST /api/login` `{"user", "password"}`: a session for a SASL user whose password
    /// checks out. A failure answers after the listener's authentication failure delay, is
    /// counted and logged, and never says which part was wrong.
    pub async fn log_in<S: Storage>(
        &self,
        node: &Node<S>,
        request: &Request,
        peer: SocketAddr,
    ) -> Result<Response, ConsoleError> {
        let body = super::json_body(request)?;
        let user = body.get("user").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        let password =
            body.get("password").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        if self.logins.get() >= LOGINS_IN_FLIGHT_MAX {
            return Err(ConsoleError::TooManyRequests);
        }
        self.logins.set(self.logins.get() + 1);
        let checked = check_password(node, &user, password).await;
        self.logins.set(self.logins.get().saturating_sub(1));
        let Some(fingerprint) = checked else {
            node.stats.authentication_failed();
            tracing::warn!(%user, %peer, "console login failed");
            let delay = node.config.sasl.as_ref().map_or(0, |sasl| sasl.failure_delay_ms);
            shard::runtime::sleep(Duration::from_millis(delay)).await;
            return Err(ConsoleError::LoginFailed);
        };
        tracing::info!(%user, %peer, "console login");
        let (token, csrf) = self.open(Principal::User(user.clone()), fingerprint);
        let mut response = Response::json("200 OK", &json!({ "user": user, "csrf": csrf }));
        response.headers.push(("Set-Cookie", Self::cookie(node, &token)));
        Ok(response)
    }
}

/// The fingerprint of `user`'s credential when `password` is theirs (SCRAM credentials of the
/// enabled mechanisms first, then PLAIN's users), `None` otherwise. PBKDF2 runs off the shard.
async fn check_password<S: Storage>(
    node: &Node<S>,
    user: &str,
    password: String,
) -> Option<Vec<u8>> {
    let enabled = node.config.sasl.as_ref().map(|sasl| sasl.mechanisms.clone()).unwrap_or_default();
    let image = node.metadata();
    let mut matched = false;
    for mechanism in ScramMechanism::ALL {
        let Some(stored) = image.scram_credential(user, mechanism) else { continue };
        if !enabled.iter().any(|name| name == mechanism.name()) {
            continue;
        }
        let (salt, iterations, password) =
            (stored.salt.clone(), stored.iterations, password.clone());
        let derived = shard::runtime::offload(move || {
            let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
            ScramCredential::from_salted_password(mechanism, &salted, &salt, iterations).stored_key
        })
        .await?;
        matched = equal_in_constant_time(&derived, &stored.stored_key);
        break;
    }
    if !matched && enabled.iter().any(|name| name == "PLAIN") {
        let users = node.config.sasl.as_ref().map(|sasl| &sasl.plain_users);
        matched = users.and_then(|users| users.get(user)).is_some_and(|expected| {
            equal_in_constant_time(expected.as_bytes(), password.as_bytes())
        });
    }
    if matched {
        fingerprint(node, user)
    } else {
        None
    }
}
