//! Envelope (key 58, KIP-590): another broker's console runs a request here as its user.
//!
//! The envelope arrives on the inter-broker listener from a principal allowed CLUSTER_ACTION
//! on the cluster (a broker: what a follower's Fetch already needs). It carries the user's
//! principal (`DefaultPrincipalData`), the browser's address and the request's frame; the
//! request then runs through `api::dispatch` with a context of that principal and address, so
//! the user's ACLs decide, here as on the console's own broker. Only the requests the console
//! makes are taken (`FORWARDABLE`): never Produce, SASL, group membership or another envelope,
//! and a Fetch only as a consumer. Envelope is accepted, not advertised: Kafka lists it only on
//! controller listeners, and clients have no use for it.
//! `api::dispatch` does the running (this module cannot import the registry): `open` checks
//! and decodes, `seal` encodes the answer.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError};
use crate::node::Node;
use crate::request_context::{Principal, RequestContext, Session};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, DefaultPrincipalData, EnvelopeRequest, EnvelopeResponse, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::Decodable;
use shard::io::Storage;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

pub const VERSIONS: (i16, i16) = (0, 0);

/// The requests an envelope may carry: the console's reads and its actions on a leader or
/// coordinator.
pub const FORWARDABLE: &[ApiKey] = &[
    ApiKey::Metadata,
    ApiKey::DescribeCluster,
    ApiKey::DescribeQuorum,
    ApiKey::DescribeConfigs,
    ApiKey::DescribeLogDirs,
    ApiKey::ListOffsets,
    ApiKey::Fetch,
    ApiKey::FindCoordinator,
    ApiKey::ListGroups,
    ApiKey::DescribeGroups,
    ApiKey::ConsumerGroupDescribe,
    ApiKey::ShareGroupDescribe,
    ApiKey::DescribeShareGroupOffsets,
    ApiKey::AlterShareGroupOffsets,
    ApiKey::OffsetFetch,
    ApiKey::OffsetCommit,
    ApiKey::ListTransactions,
    ApiKey::DescribeTransactions,
    ApiKey::DescribeProducers,
    ApiKey::DeleteRecords,
];

/// An envelope's request, ready to run as its user.
pub struct Opened {
    pub context: RequestContext,
    pub request: RequestKind,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
}

/// Checks the envelope and decodes the request inside it.
pub fn open<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    envelope: EnvelopeRequest,
) -> Result<Opened, EnvelopeResponse> {
    let inter_broker = *context.listener == *node.config.cluster.inter_broker_listener;
    if !inter_broker || !node.allowed(context, AclOperation::ClusterAction, Resource::Cluster) {
        tracing::warn!(principal = %context.principal, address = %context.client_address,
            listener = %context.listener, "envelope refused: not a broker on the inter-broker listener");
        return Err(refused(BrokerError::ClusterAuthorizationFailed));
    }
    let invalid = |why: String| refused(BrokerError::InvalidRequest(why));
    let principal = principal_of(envelope.request_principal).map_err(invalid)?;
    let ip = address_of(&envelope.client_host_address).map_err(invalid)?;
    let frame = protocol::decode_header(envelope.request_data)
        .map_err(|e| invalid(format!("the enveloped request: {e}")))?;
    let version = frame.header.request_api_version;
    if !FORWARDABLE.contains(&frame.api_key) {
        return Err(invalid(format!("{:?} is not taken in an envelope", frame.api_key)));
    }
    let request = protocol::decode_body(frame.api_key, version, frame.body)
        .map_err(|e| invalid(format!("the enveloped request: {e}")))?;
    if let RequestKind::Fetch(fetch) = &request {
        if fetch.replica_id.0 >= 0 || fetch.replica_state.replica_id.0 >= 0 {
            return Err(invalid("a follower's Fetch is not taken in an envelope".into()));
        }
    }
    let inner = RequestContext {
        client_id: frame.header.client_id.as_ref().map(|id| id.to_string()),
        client_address: SocketAddr::new(ip, 0),
        principal: principal.clone(),
        session: Rc::new(Session::new(false, principal)),
        api_key: frame.api_key,
        api_version: version,
        correlation_id: frame.header.correlation_id,
        ..context.clone()
    };
    Ok(Opened {
        context: inner,
        request,
        api_key: frame.api_key,
        version,
        correlation_id: frame.header.correlation_id,
    })
}

/// The envelope's answer: the inner response's frame (header and body, no length prefix).
pub fn seal(opened: &Opened, answer: Option<ResponseKind>) -> EnvelopeResponse {
    let Some(answer) = answer else {
        return refused(BrokerError::InvalidRequest("the request has no answer".into()));
    };
    match protocol::encode_response(opened.api_key, opened.version, opened.correlation_id, &answer)
    {
        Ok(frame) => {
            let mut response = EnvelopeResponse::default();
            response.response_data =
                Some(Bytes::copy_from_slice(frame.get(FRAME_PREFIX_BYTES..).unwrap_or_default()));
            response
        }
        Err(error) => refused(BrokerError::InvalidRequest(format!("encoding the answer: {error}"))),
    }
}

fn refused(error: BrokerError) -> EnvelopeResponse {
    let mut response = EnvelopeResponse::default();
    response.error_code = error_code(&error);
    response
}

/// The user an envelope names: `User:<name>` (`User:ANONYMOUS` is the anonymous principal).
fn principal_of(data: Option<Bytes>) -> Result<Principal, String> {
    let Some(data) = data else { return Err("an envelope without a principal".into()) };
    let mut data = BytesMut::from(&data[..]).freeze();
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        DefaultPrincipalData::decode(&mut data, 0).map_err(|e| e.to_string())
    }))
    .map_err(|_| "an undecodable principal".to_string())??;
    if &*decoded._type != "User" {
        return Err(format!("principal type {:?} is not User", &*decoded._type));
    }
    Ok(match &*decoded.name {
        "ANONYMOUS" => Principal::Anonymous,
        name => Principal::User(name.to_string()),
    })
}

/// The client's address: 4 bytes (IPv4) or 16 (IPv6).
fn address_of(bytes: &[u8]) -> Result<IpAddr, String> {
    if let Ok(octets) = <[u8; 4]>::try_from(bytes) {
        return Ok(IpAddr::from(octets));
    }
    if let Ok(octets) = <[u8; 16]>::try_from(bytes) {
        return Ok(IpAddr::from(octets));
    }
    Err(format!("a client address of {} bytes", bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    #[test]
    fn the_principal_and_address_are_read_as_kafka_writes_them() {
        let mut data = DefaultPrincipalData::default();
        data._type = StrBytes::from_static_str("User");
        data.name = StrBytes::from_static_str("alice");
        let mut encoded = BytesMut::new();
        data.encode(&mut encoded, 0).expect("encodes");
        assert_eq!(principal_of(Some(encoded.freeze())), Ok(Principal::User("alice".into())));
        data.name = StrBytes::from_static_str("ANONYMOUS");
        let mut encoded = BytesMut::new();
        data.encode(&mut encoded, 0).expect("encodes");
        assert_eq!(principal_of(Some(encoded.freeze())), Ok(Principal::Anonymous));
        assert!(principal_of(Some(Bytes::from_static(&[0xff, 0xff, 0xff]))).is_err());
        assert!(principal_of(None).is_err());
        assert_eq!(address_of(&[10, 0, 0, 7]), Ok(IpAddr::from([10, 0, 0, 7])));
        assert!(address_of(&[1, 2, 3]).is_err());
    }
}
