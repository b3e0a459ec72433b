//! SASL on the SASL_PLAINTEXT and SASL_SSL listeners (issue #18): a connection's
//! authentication state, and the PLAIN mechanism (RFC 4616).
//!
//! A connection on a SASL listener starts unauthenticated. It may send ApiVersions,
//! SaslHandshake (v1: the mechanism) and then SaslAuthenticate (the mechanism's token); any
//! other request before authentication closes it (as Kafka: "unexpected Kafka request during
//! SASL handshake"), and its frames are bounded by `sasl.server.max.receive.size` until then.
//! A failed authentication is answered SASL_AUTHENTICATION_FAILED, counted and logged with the
//! client's address and user name (never the password), and the connection is closed after
//! `connection.failed.authentication.delay.ms`. Once authenticated, the principal is
//! `User:<name>`; both SASL requests are barriers, so the requests after them see it.
//! PLAIN's users are Kafka's `PlainLoginModule` JAAS options (`user_<name>="<password>"` in
//! `sasl.jaas.config`). SCRAM, with salted credentials in the metadata log, comes next.
//! Runs on: the connection's shard (the session is the connection's).

use crate::request_context::Principal;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

/// The mechanisms this build offers.
pub const MECHANISMS: &[&str] = &["PLAIN"];

/// The broker's SASL settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, each one of `MECHANISMS`.
    pub mechanisms: Vec<String>,
    /// PLAIN's users and passwords (`sasl.jaas.config`'s `user_<name>="<password>"`).
    pub plain_users: BTreeMap<String, String>,
    /// `sasl.server.max.receive.size`: the largest frame before authentication.
    pub max_receive_bytes: usize,
    /// `connection.failed.authentication.delay.ms`.
    pub failure_delay_ms: u64,
}

/// The users of a `PlainLoginModule` JAAS configuration: its `user_<name>="<password>"`
/// options (`username`/`password`, the broker's own login, are not users).
pub fn plain_users(jaas: &str) -> Result<BTreeMap<String, String>, String> {
    let jaas = jaas.trim();
    if jaas.is_empty() {
        return Ok(BTreeMap::new());
    }
    let body = jaas
        .strip_prefix("org.apache.kafka.common.security.plain.PlainLoginModule")
        .ok_or("sasl.jaas.config: strata reads org.apache.kafka.common.security.plain.PlainLoginModule")?
        .trim_start();
    let body = body.strip_prefix("required").ok_or("sasl.jaas.config: expected `required`")?;
    let body = body.trim().strip_suffix(';').ok_or("sasl.jaas.config: expected a final `;`")?;
    let mut users = BTreeMap::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (key, after) =
            rest.split_once('=').ok_or("sasl.jaas.config: expected key=\"value\"")?;
        let after = after.trim_start();
        let after = after.strip_prefix('"').ok_or("sasl.jaas.config: values are quoted")?;
        let (value, after) = after.split_once('"').ok_or("sasl.jaas.config: unclosed quote")?;
        if let Some(user) = key.trim().strip_prefix("user_") {
            users.insert(user.to_string(), value.to_string());
        }
        rest = after.trim_start();
    }
    Ok(users)
}

/// Where a connection is in its authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not a SASL listener: nothing to do, SASL requests are out of place.
    NotSasl,
    /// Waiting for SaslHandshake.
    Handshake,
    /// The mechanism is chosen; waiting for SaslAuthenticate.
    Authenticate(String),
    Authenticated,
    /// Authentication failed: the connection closes once the answer is written.
    Failed,
}

/// A connection's authentication: its step and its principal.
#[derive(Debug)]
pub struct Session {
    step: RefCell<Step>,
    principal: RefCell<Principal>,
    /// Failed attempts on this connection (a failure closes it, so at most one).
    failures: Cell<u32>,
}

impl Session {
    /// A session on a listener: `sasl` for SASL_PLAINTEXT and SASL_SSL ones, and the
    /// principal the transport established (an mTLS subject, or anonymous).
    pub fn new(sasl: bool, principal: Principal) -> Self {
        let step = if sasl { Step::Handshake } else { Step::NotSasl };
        Session {
            step: RefCell::new(step),
            principal: RefCell::new(principal),
            failures: Cell::new(0),
        }
    }

    pub fn step(&self) -> Step {
        self.step.borrow().clone()
    }

    pub fn principal(&self) -> Principal {
        self.principal.borrow().clone()
    }

    /// Requests other than ApiVersions and the SASL ones may run.
    pub fn authenticated(&self) -> bool {
        matches!(*self.step.borrow(), Step::NotSasl | Step::Authenticated)
    }

    pub fn failed(&self) -> bool {
        *self.step.borrow() == Step::Failed
    }

    /// SaslHandshake: `mechanism` is enabled (the next step is its SaslAuthenticate).
    pub fn choose(&self, mechanism: &str) {
        *self.step.borrow_mut() = Step::Authenticate(mechanism.to_string());
    }

    pub fn succeed(&self, user: &str) {
        *self.step.borrow_mut() = Step::Authenticated;
        *self.principal.borrow_mut() = Principal::User(user.to_string());
    }

    pub fn fail(&self) {
        self.failures.set(self.failures.get() + 1);
        *self.step.borrow_mut() = Step::Failed;
    }
}

/// Why an authentication failed, as the client is told (never which part was wrong).
pub const AUTHENTICATION_FAILED: &str = "Authentication failed: Invalid username or password";

/// PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`, checked against the configured users
/// in constant time per byte. The user name on success; on failure the user name the client
/// gave (for the log), if any.
pub fn plain(token: &[u8], users: &BTreeMap<String, String>) -> Result<String, Option<String>> {
    let mut parts = token.split(|byte| *byte == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(None);
    };
    let Ok(user) = std::str::from_utf8(user) else { return Err(None) };
    // Kafka: an authorization id other than the user is refused.
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err(Some(user.to_string()));
    }
    let expected = users.get(user).map(String::as_bytes);
    let matches = expected.is_some_and(|expected| {
        expected.len() == password.len()
            && expected.iter().zip(password).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    });
    if matches {
        Ok(user.to_string())
    } else {
        Err(Some(user.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_users_are_read_and_the_login_is_not_a_user() {
        let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="admin-secret"
            user_admin="admin-secret" user_alice="alice secret";"#;
        let users = plain_users(jaas).expect("parses");
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "alice secret");
        assert!(plain_users("com.example.Other required;").is_err());
        assert!(plain_users("").expect("empty").is_empty());
    }

    #[test]
    fn plain_tokens_are_checked() {
        let users = BTreeMap::from([("alice".to_string(), "pw".to_string())]);
        assert_eq!(plain(b"\0alice\0pw", &users), Ok("alice".into()));
        assert_eq!(plain(b"alice\0alice\0pw", &users), Ok("alice".into()));
        assert_eq!(plain(b"\0alice\0pW", &users), Err(Some("alice".into())));
        assert_eq!(plain(b"bob\0alice\0pw", &users), Err(Some("alice".into())));
        assert_eq!(plain(b"\0mallory\0pw", &users), Err(Some("mallory".into())));
        assert_eq!(plain(b"garbage", &users), Err(None));
        assert_eq!(plain(b"\0a\0b\0c", &users), Err(None));
    }
}
