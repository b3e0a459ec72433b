//! SaslAuthenticate (key 36), v0-2: the mechanism's token after SaslHandshake (`crate::sasl`).
//! PLAIN's token is checked against the configured users: success makes the connection's
//! principal `User:<name>`; failure is SASL_AUTHENTICATION_FAILED, counted, logged with the
//! client's address and user name (never the password), and the connection is closed after
//! `connection.failed.authentication.delay.ms`. v1+ answers a session lifetime of 0: no
//! re-authentication is required (Kafka's `connections.max.reauth.ms` default).

use crate::error::NONE;
use crate::node::Node;
use crate::request_context::{RequestContext, Step};
use crate::sasl::{self, AUTHENTICATION_FAILED};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    let mut response = SaslAuthenticateResponse::default();
    response.session_lifetime_ms = 0;
    let session = &context.session;
    let (Step::Authenticate(mechanism), Some(settings)) =
        (session.step(), node.config.sasl.as_ref())
    else {
        response.error_code = ResponseError::IllegalSaslState.code();
        response.error_message = Some(super::str_bytes("no SASL handshake on this connection"));
        return response;
    };
    let outcome = match mechanism.as_str() {
        "PLAIN" => sasl::plain(&request.auth_bytes, &settings.plain_users),
        _ => Err(None),
    };
    match outcome {
        Ok(user) => {
            tracing::debug!(address = %context.client_address, %user, %mechanism, "authenticated");
            session.succeed(&user);
            response.error_code = NONE;
        }
        Err(user) => {
            node.stats.authentication_failed();
            tracing::warn!(
                address = %context.client_address,
                user = user.as_deref().unwrap_or("(unreadable token)"),
                %mechanism,
                "SASL authentication failed"
            );
            session.fail();
            response.error_code = ResponseError::SaslAuthenticationFailed.code();
            response.error_message = Some(super::str_bytes(AUTHENTICATION_FAILED));
        }
    }
    response
}
