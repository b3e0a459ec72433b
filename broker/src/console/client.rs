//! The console's one door to the cluster: Kafka requests made as the console's user.
//!
//! A request for this broker runs through `api::dispatch` with a `RequestContext` whose
//! principal is the user and whose client address is the browser's, so the handlers' own ACL
//! checks apply. A request for another broker (a partition's leader, a group's coordinator)
//! is wrapped in an EnvelopeRequest (KIP-590) carrying the user's principal and address, and
//! sent over an inter-broker connection (`peer::connect`: TLS and the broker's login as the
//! cluster configures them); that broker's `handlers::envelope` runs it as the user. Nothing
//! here decides an ACL, so the console cannot allow what `strata acl` does not.

use super::ConsoleError;
use crate::node::Node;
use crate::peer::PeerStream;
use crate::request_context::{Principal, RequestContext, Session};
use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use shard::io::Storage;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// How long one call to another broker may take (connect, run, answer).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read from another broker (a Fetch of the message browser, a Metadata
/// of thousands of topics).
pub const ANSWER_BYTES_MAX: usize = 16 << 20;
/// Idle inter-broker connections kept per broker for the console's calls.
const IDLE_CONNECTIONS_PER_BROKER: usize = 4;
/// The EnvelopeRequest version sent (Kafka's only one).
pub const ENVELOPE_VERSION: i16 = 0;
const CLIENT_ID: &str = "strata-console";

/// A Kafka request the console makes, at the version it makes it in.
pub trait Call {
    const KEY: ApiKey;
    const VERSION: i16;
    type Answer;
    fn into_kind(self) -> RequestKind;
    fn answer(kind: ResponseKind) -> Option<Self::Answer>;
}

macro_rules! calls {
    ($( $request:ident => $response:ident, $key:ident, $version:expr; )*) => {
        $( impl Call for $request {
            const KEY: ApiKey = ApiKey::$key;
            const VERSION: i16 = $version;
            type Answer = $response;
            fn into_kind(self) -> RequestKind {
                RequestKind::$key(self)
            }
            fn answer(kind: ResponseKind) -> Option<$response> {
                match kind {
                    ResponseKind::$key(answer) => Some(answer),
                    _ => None,
                }
            }
        } )*
    };
}

calls! {
    MetadataRequest => MetadataResponse, Metadata, 12;
    DescribeClusterRequest => DescribeClusterResponse, DescribeCluster, 2;
    DescribeQuorumRequest => DescribeQuorumResponse, DescribeQuorum, 1;
    DescribeConfigsRequest => DescribeConfigsResponse, DescribeConfigs, 4;
    DescribeLogDirsRequest => DescribeLogDirsResponse, DescribeLogDirs, 4;
    ListOffsetsRequest => ListOffsetsResponse, ListOffsets, 7;
    FetchRequest => FetchResponse, Fetch, 12;
    FindCoordinatorRequest => FindCoordinatorResponse, FindCoordinator, 4;
    ListGroupsRequest => ListGroupsResponse, ListGroups, 5;
    DescribeGroupsRequest => DescribeGroupsResponse, DescribeGroups, 5;
    ConsumerGroupDescribeRequest => ConsumerGroupDescribeResponse, ConsumerGroupDescribe, 0;
    ShareGroupDescribeRequest => ShareGroupDescribeResponse, ShareGroupDescribe, 1;
    DescribeShareGroupOffsetsRequest => DescribeShareGroupOffsetsResponse, DescribeShareGroupOffsets, 0;
    AlterShareGroupOffsetsRequest => AlterShareGroupOffsetsResponse, AlterShareGroupOffsets, 0;
    OffsetFetchRequest => OffsetFetchResponse, OffsetFetch, 8;
    OffsetCommitRequest => OffsetCommitResponse, OffsetCommit, 8;
    ListTransactionsRequest => ListTransactionsResponse, ListTransactions, 1;
    DescribeTransactionsRequest => DescribeTransactionsResponse, DescribeTransactions, 0;
    DescribeProducersRequest => DescribeProducersResponse, DescribeProducers, 0;
    DeleteRecordsRequest => DeleteRecordsResponse, DeleteRecords, 2;
    CreateTopicsRequest => CreateTopicsResponse, CreateTopics, 7;
    IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse, IncrementalAlterConfigs, 1;
}

/// Inter-broker connections kept for the console's calls (shard 0's, one pool per console).
#[derive(Default)]
pub struct PeerPool {
    idle: RefCell<HashMap<i32, Vec<PeerStream>>>,
    correlation: Cell<i32>,
}

/// Who the calls are made as: the console user, from the browser's address.
pub struct Caller<'a, S: Storage> {
    pub node: &'a Node<S>,
    pub pool: &'a PeerPool,
    pub principal: Principal,
    pub address: SocketAddr,
}

impl<S: Storage> Caller<'_, S> {
    /// Runs `request` on `broker` as the user.
    pub async fn call<R: Call>(&self, broker: i32, request: R) -> Result<R::Answer, ConsoleError> {
        let answer = if broker == self.node.node_id().0 {
            let context = self.context(R::KEY, R::VERSION);
            crate::api::dispatch(self.node, &context, request.into_kind()).await
        } else {
            Some(self.remote(broker, R::KEY, R::VERSION, request.into_kind()).await?)
        };
        answer.and_then(R::answer).ok_or_else(|| {
            ConsoleError::Unavailable(format!("no {:?} answer from broker {broker}", R::KEY))
        })
    }

    /// Runs `request` here (Metadata, DescribeCluster, CreateTopics: any broker answers).
    pub async fn here<R: Call>(&self, request: R) -> Result<R::Answer, ConsoleError> {
        self.call(self.node.node_id().0, request).await
    }

    /// The context a handler sees for the user's request.
    pub fn context(&self, api_key: ApiKey, api_version: i16) -> RequestContext {
        RequestContext {
            client_id: Some(CLIENT_ID.into()),
            client_address: self.address,
            listener: Rc::from(self.node.config.cluster.inter_broker_listener.as_str()),
            principal: self.principal.clone(),
            session: Rc::new(Session::new(false, self.principal.clone())),
            ..RequestContext::internal(api_key, api_version)
        }
    }

    async fn remote(
        &self,
        broker: i32,
        key: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> Result<ResponseKind, ConsoleError> {
        let endpoint = self
            .node
            .broker(wire::ids::NodeId(broker))
            .ok_or_else(|| ConsoleError::Unavailable(format!("broker {broker} is not live")))?;
        let envelope = self.envelope(key, version, &request)?;
        let exchange = async {
            let mut stream = match self.pool.take(broker) {
                Some(stream) => stream,
                None => {
                    let port = u16::try_from(endpoint.port).unwrap_or_default();
                    crate::peer::connect(&endpoint.host, port, CALL_TIMEOUT, CLIENT_ID).await?
                }
            };
            let answer =
                crate::peer::exchange_frame(&mut stream, &envelope, ANSWER_BYTES_MAX).await?;
            self.pool.give_back(broker, stream);
            Ok::<_, String>(answer)
        };
        let body = futures_lite::future::or(exchange, async {
            shard::runtime::sleep(CALL_TIMEOUT).await;
            Err(format!("no answer in {CALL_TIMEOUT:?}"))
        })
        .await
        .map_err(|e| ConsoleError::Unavailable(format!("broker {broker}: {e}")))?;
        open_answer(key, version, body)
            .map_err(|e| ConsoleError::Unavailable(format!("broker {broker}: {e}")))?
    }

    /// The request inside an EnvelopeRequest frame, as the user from the browser's address.
    fn envelope(
        &self,
        key: ApiKey,
        version: i16,
        request: &RequestKind,
    ) -> Result<bytes::BytesMut, ConsoleError> {
        let inner = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let frame = protocol::encode_request(&inner, request).map_err(ConsoleError::Internal)?;
        let mut principal = DefaultPrincipalData::default();
        principal._type = StrBytes::from_static_str("User");
        principal.name = StrBytes::from_string(self.principal.name().to_string());
        let mut encoded = bytes::BytesMut::new();
        principal.encode(&mut encoded, 0).map_err(|e| ConsoleError::Internal(e.to_string()))?;
        let mut envelope = EnvelopeRequest::default();
        envelope.request_data =
            Bytes::copy_from_slice(frame.get(FRAME_PREFIX_BYTES..).unwrap_or_default());
        envelope.request_principal = Some(encoded.freeze());
        envelope.client_host_address = match self.address.ip() {
            std::net::IpAddr::V4(ip) => Bytes::copy_from_slice(&ip.octets()),
            std::net::IpAddr::V6(ip) => Bytes::copy_from_slice(&ip.octets()),
        };
        let correlation = self.pool.next_correlation();
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Envelope as i16)
            .with_request_api_version(ENVELOPE_VERSION)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        protocol::encode_request(&header, &RequestKind::Envelope(envelope))
            .map_err(ConsoleError::Internal)
    }
}

impl PeerPool {
    fn take(&self, broker: i32) -> Option<PeerStream> {
        self.idle.borrow_mut().get_mut(&broker).and_then(Vec::pop)
    }

    fn give_back(&self, broker: i32, stream: PeerStream) {
        let mut idle = self.idle.borrow_mut();
        let streams = idle.entry(broker).or_default();
        if streams.len() < IDLE_CONNECTIONS_PER_BROKER {
            streams.push(stream);
        }
    }

    fn next_correlation(&self) -> i32 {
        let next = self.correlation.get().wrapping_add(1);
        self.correlation.set(next);
        next
    }
}

/// The inner answer of an EnvelopeResponse body: the response to `key` at `version`, or the
/// envelope's own error (the receiving broker refused to forward).
fn open_answer(
    key: ApiKey,
    version: i16,
    body: Bytes,
) -> Result<Result<ResponseKind, ConsoleError>, String> {
    let (_, envelope) = protocol::decode_response(ApiKey::Envelope, ENVELOPE_VERSION, body)
        .map_err(|e| e.to_string())?;
    let ResponseKind::Envelope(envelope) = envelope else {
        return Err("not an Envelope answer".into());
    };
    if envelope.error_code != crate::error::NONE {
        let message = format!("the broker refused to run the request ({key:?})");
        return Ok(Err(ConsoleError::Kafka { code: envelope.error_code, message }));
    }
    let inner = envelope.response_data.ok_or("an Envelope answer without its response")?;
    let (_, response) =
        protocol::decode_response(key, version, inner).map_err(|e| e.to_string())?;
    Ok(Ok(response))
}
