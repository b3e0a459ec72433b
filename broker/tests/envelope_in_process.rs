//! Envelope (KIP-590) as the console's calls to another broker use it: only a broker (CLUSTER_ACTION
//! on the inter-broker listener) may send one, the request inside runs as the principal the
//! envelope names, so that principal's ACLs decide, and only the console's requests are taken.

use broker::in_process::{test_config, InProcess};
use broker::request_context::{Principal, RequestContext};
use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use wire::protocol::{self, FRAME_PREFIX_BYTES};

const TOPIC: &str = "secret";

fn config() -> broker::config::BrokerConfig {
    let mut config = test_config();
    config.authorizer = broker::config::security::authorizer(
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "User:broker;User:admin",
        "false",
    )
    .expect("valid");
    config
}

fn as_user(name: &str, api_key: ApiKey, version: i16) -> RequestContext {
    let mut context = RequestContext::internal(api_key, version);
    context.principal = Principal::User(name.into());
    context
}

/// An EnvelopeRequest carrying `request` (at `version`) as `User:<user>` from 10.0.0.7.
fn envelope(user: &str, version: i16, request: RequestKind) -> EnvelopeRequest {
    let key = broker::api::key_of(&request).expect("served");
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("strata-console")));
    let frame = protocol::encode_request(&header, &request).expect("encodes");
    let mut principal = DefaultPrincipalData::default();
    principal._type = StrBytes::from_static_str("User");
    principal.name = StrBytes::from_string(user.to_string());
    let mut encoded = bytes::BytesMut::new();
    principal.encode(&mut encoded, 0).expect("encodes");
    let mut envelope = EnvelopeRequest::default();
    envelope.request_data = Bytes::copy_from_slice(&frame[FRAME_PREFIX_BYTES..]);
    envelope.request_principal = Some(encoded.freeze());
    envelope.client_host_address = Bytes::from_static(&[10, 0, 0, 7]);
    envelope
}

fn metadata_of(topic: &str) -> RequestKind {
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(TopicName(StrBytes::from_string(topic.into())));
    let mut request = MetadataRequest::default();
    request.topics = Some(vec![wanted]);
    request.allow_auto_topic_creation = false;
    RequestKind::Metadata(request)
}

async fn send(broker: &InProcess, from: &str, inner: EnvelopeRequest) -> EnvelopeResponse {
    match broker.call_in(&as_user(from, ApiKey::Envelope, 0), inner).await {
        Some(ResponseKind::Envelope(response)) => response,
        other => panic!("not an Envelope answer: {other:?}"),
    }
}

/// The inner Metadata answer's error code for the topic.
fn topic_code(response: EnvelopeResponse) -> i16 {
    assert_eq!(response.error_code, 0, "the envelope itself is taken");
    let data = response.response_data.expect("an inner answer");
    match protocol::decode_response(ApiKey::Metadata, 12, data).expect("decodes").1 {
        ResponseKind::Metadata(metadata) => metadata.topics[0].error_code,
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_envelope_runs_its_request_as_the_user_it_names_and_only_a_broker_may_send_one() {
    InProcess::run(|| async {
        let broker = InProcess::start(config(), 1).await;
        let mut topic = CreatableTopic::default();
        topic.name = TopicName(StrBytes::from_static_str(TOPIC));
        topic.num_partitions = 1;
        topic.replication_factor = 1;
        let mut create = CreateTopicsRequest::default();
        create.topics = vec![topic];
        let created = broker.call_in(&as_user("admin", ApiKey::CreateTopics, 7), create).await;
        assert!(
            matches!(created, Some(ResponseKind::CreateTopics(r)) if r.topics[0].error_code == 0)
        );

        // The broker forwards for alice, who may not DESCRIBE the topic: her ACLs decide.
        let refused = send(&broker, "broker", envelope("alice", 12, metadata_of(TOPIC))).await;
        assert_eq!(topic_code(refused), 29, "TOPIC_AUTHORIZATION_FAILED for alice");
        let allowed = send(&broker, "broker", envelope("admin", 12, metadata_of(TOPIC))).await;
        assert_eq!(topic_code(allowed), 0, "admin (a super user) sees it");

        // alice herself cannot send an envelope naming admin.
        let forged = send(&broker, "alice", envelope("admin", 12, metadata_of(TOPIC))).await;
        assert_eq!(forged.error_code, 31, "CLUSTER_AUTHORIZATION_FAILED");
        assert!(forged.response_data.is_none());

        // Produce (or any request the console does not make) is not taken, nor a nested one.
        let produce = RequestKind::Produce(ProduceRequest::default());
        let refused = send(&broker, "broker", envelope("admin", 9, produce)).await;
        assert_eq!(refused.error_code, 42, "INVALID_REQUEST");
        let nested = RequestKind::Envelope(envelope("admin", 12, metadata_of(TOPIC)));
        let refused = send(&broker, "broker", envelope("admin", 0, nested)).await;
        assert_eq!(refused.error_code, 42, "INVALID_REQUEST");

        // Bytes that are no request at all are refused, not a panic.
        let mut garbage = envelope("admin", 12, metadata_of(TOPIC));
        garbage.request_data = Bytes::from_static(&[0, 3, 0, 12, 0xff]);
        assert_eq!(send(&broker, "broker", garbage).await.error_code, 42);
        broker.close().await;
    });
}
