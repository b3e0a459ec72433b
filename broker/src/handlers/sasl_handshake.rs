//! SaslHandshake (key 17), v1: the client names its SASL mechanism on a SASL listener
//! (`crate::sasl`, `request_context::Session`). Answered with the enabled mechanisms; an unknown one is
//! UNSUPPORTED_SASL_MECHANISM and ends the connection. Out of place (a listener without SASL,
//! or a second handshake) it is ILLEGAL_SASL_STATE. v0 (raw SASL tokens after the handshake,
//! outside Kafka frames) is not served: every client since Kafka 1.0 sends v1.

use crate::error::NONE;
use crate::node::Node;
use crate::request_context::{RequestContext, Step};
use kafka_protocol::error::ResponseError;
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
    if session.step() != Step::Handshake {
        response.error_code = ResponseError::IllegalSaslState.code();
        return response;
    }
    let mechanism = request.mechanism.to_string();
    if enabled.contains(&mechanism) {
        session.choose(&mechanism);
        response.error_code = NONE;
    } else {
        tracing::info!(address = %context.client_address, %mechanism, "SASL mechanism not enabled");
        session.fail();
        response.error_code = ResponseError::UnsupportedSaslMechanism.code();
    }
    response
}
