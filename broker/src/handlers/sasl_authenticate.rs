//! SaslAuthenticate (key 36), v0-2: the mechanism's tokens after SaslHandshake (`crate::sasl`).
//! PLAIN's one token is checked against the configured users. SCRAM-SHA-256/512 take two
//! round trips (`sasl::scram`): the client's first message is answered with the salt and
//! iterations of the user's credential in this broker's metadata image, and its final one is
//! checked against the StoredKey and answered with the server's signature. Success makes the
//! connection's principal `User:<name>`; failure is SASL_AUTHENTICATION_FAILED, counted, logged
//! with the client's address and user name (never a secret), and the connection is closed
//! after `connection.failed.authentication.delay.ms`. v1+ answers the session lifetime,
//! `connections.max.reauth.ms` (0, Kafka's default: the session never expires); a client
//! re-authenticates on the same connection before it passes (KIP-368), as the same user with
//! the same mechanism.

use crate::error::{BrokerError, NONE};
use crate::node::Node;
use crate::request_context::{RequestContext, Step, REAUTH_CHANGED};
use crate::sasl::scram::{self, ScramExchange, ScramMechanism};
use crate::sasl::{self, AUTHENTICATION_FAILED};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 2);

/// What one token leads to.
enum Outcome {
    /// Authenticated as this user; the bytes (SCRAM's server-final) go back to the client.
    Done(String, Vec<u8>),
    /// SCRAM's first round trip: the server-first message goes back.
    Continue(Box<ScramExchange>, Vec<u8>),
    /// Refused: the message for the client, and the user name for the log.
    Failed(String, Option<String>),
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    let mut response = SaslAuthenticateResponse::default();
    response.session_lifetime_ms = 0;
    let reauth_ms = node.config.sasl.as_ref().map_or(0, |sasl| sasl.reauth_ms);
    let step = context.session.step();
    let Some((mechanism, outcome)) = decide(node, &step, &request) else {
        let state = BrokerError::IllegalSaslState("no SASL handshake on this connection".into());
        (response.error_code, response.error_message) = super::error_fields(&state);
        return response;
    };
    answer(node, context, &mechanism, outcome, reauth_ms, &mut response);
    response
}

/// The mechanism and what the token leads to at this step; `None` without a handshake.
fn decide<S: Storage>(
    node: &Node<S>,
    step: &Step,
    request: &SaslAuthenticateRequest,
) -> Option<(String, Outcome)> {
    let decided = match (step, node.config.sasl.as_ref()) {
        (Step::Authenticate(mechanism), Some(settings)) if mechanism == "PLAIN" => {
            let outcome = match sasl::plain(&request.auth_bytes, &settings.plain_users) {
                Ok(user) => Outcome::Done(user, Vec::new()),
                Err(user) => Outcome::Failed(AUTHENTICATION_FAILED.to_string(), user),
            };
            (mechanism.clone(), outcome)
        }
        (Step::Authenticate(name), Some(_)) if ScramMechanism::from_name(name).is_some() => {
            let mechanism = ScramMechanism::from_name(name).unwrap_or(ScramMechanism::Sha256);
            let image = node.metadata();
            let started = ScramExchange::start(
                mechanism,
                &request.auth_bytes,
                &scram::server_nonce(),
                |user| image.scram_credential(user, mechanism).cloned(),
            );
            let outcome = match started {
                Ok((exchange, server_first)) => Outcome::Continue(Box::new(exchange), server_first),
                Err(failure) => Outcome::Failed(failure.message, failure.user),
            };
            (name.clone(), outcome)
        }
        (Step::ScramFinal(exchange), Some(_)) => {
            let outcome = match exchange.finish(&request.auth_bytes) {
                Ok(server_final) => Outcome::Done(exchange.user.clone(), server_final),
                Err(failure) => Outcome::Failed(failure.message, failure.user),
            };
            (exchange.mechanism.name().to_string(), outcome)
        }
        _ => return None,
    };
    Some(decided)
}

/// Applies `outcome` to the connection's session and answers it.
fn answer<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    mechanism: &str,
    outcome: Outcome,
    reauth_ms: u64,
    response: &mut SaslAuthenticateResponse,
) {
    let session = &context.session;
    match outcome {
        Outcome::Done(user, bytes) => {
            let again = session.reauthenticating();
            let lifetime = (reauth_ms > 0).then(|| std::time::Duration::from_millis(reauth_ms));
            if session.succeed(mechanism, &user, lifetime) {
                tracing::debug!(address = %context.client_address, %user, %mechanism, again, "authenticated");
                if again {
                    node.stats.reauthenticated();
                }
                response.error_code = NONE;
                response.auth_bytes = bytes.into();
                response.session_lifetime_ms = i64::try_from(reauth_ms).unwrap_or(i64::MAX);
            } else {
                node.stats.authentication_failed();
                tracing::warn!(address = %context.client_address, %user, %mechanism, "{REAUTH_CHANGED}");
                let failed = BrokerError::SaslAuthenticationFailed(REAUTH_CHANGED.into());
                (response.error_code, response.error_message) = super::error_fields(&failed);
            }
        }
        Outcome::Continue(exchange, bytes) => {
            session.continue_scram(*exchange);
            response.error_code = NONE;
            response.auth_bytes = bytes.into();
        }
        Outcome::Failed(message, user) => {
            node.stats.authentication_failed();
            tracing::warn!(
                address = %context.client_address,
                user = user.as_deref().unwrap_or("(unreadable token)"),
                %mechanism,
                "SASL authentication failed"
            );
            session.fail();
            let failed = BrokerError::SaslAuthenticationFailed(message);
            (response.error_code, response.error_message) = super::error_fields(&failed);
        }
    }
}
