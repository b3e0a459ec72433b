//! SaslHandshake (key 17), v1: the client names its SASL mechanism on a SASL listener
//! (`crate::sasl`, `request_context::Session`). Answered with the enabled mechanisms; an unknown one is
//! UNSUPPORTED_SASL_MECHANISM and ends the connection. Out of place (a listener without SASL,
//! or a handshake in the middle of one) it is ILLEGAL_SASL_STATE. On an authenticated
//! connection it starts a re-authentication (KIP-368), which must use the same mechanism
//! (ILLEGAL_SASL_STATE and the connection closed otherwise). v0 (raw SASL tokens after the handshake,
//! outside Kafka frames) is not served: every client since Kafka 1.0 sends v1.

use crate::error::{error_code, BrokerError, NONE};
use crate::node::Node;
use crate::request_context::{RequestContext, REAUTH_CHANGED};
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (1, 1);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: SaslHandshakeRequest,
) -> SaslHandshakeResponse {
    let mut response = SaslHandshakeResponse::default();
    let enabled = node.config.sasl.as_ref().map(|sasl| sasl.mechanisms.clone()).unwrap_or_default();
    response.mechanisms = enabled.iter().map(|m| super::str_bytes(m)).collect();
    let session = &context.session;
    if !session.may_handshake() {
        let state = BrokerError::IllegalSaslState("no SASL handshake expected here".into());
        response.error_code = error_code(&state);
        return response;
    }
    let mechanism = request.mechanism.to_string();
    if enabled.contains(&mechanism) {
        if session.choose(&mechanism) {
            response.error_code = NONE;
        } else {
            node.stats.authentication_failed();
            tracing::warn!(address = %context.client_address, %mechanism, "{REAUTH_CHANGED}");
            response.error_code = error_code(&BrokerError::IllegalSaslState(REAUTH_CHANGED.into()));
        }
    } else {
        tracing::info!(address = %context.client_address, %mechanism, "SASL mechanism not enabled");
        session.fail();
        response.error_code = error_code(&BrokerError::UnsupportedSaslMechanism(mechanism));
    }
    response
}
