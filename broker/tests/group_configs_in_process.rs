//! Group configs (KIP-848's GROUP config resource, type 32) on an in-process node: set and
//! removed with IncrementalAlterConfigs, read with DescribeConfigs (the group's value with
//! source GROUP_CONFIG, else the broker's or Kafka's default), checked as Kafka checks them,
//! under ALTER_CONFIGS / DESCRIBE_CONFIGS on the group, and used by the KIP-848 coordinator
//! (the heartbeat interval a group's members are given).

use broker::in_process::{test_config, InProcess};
use broker::request_context::{Principal, RequestContext};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const GROUP: i8 = 32;
const SET: i8 = 0;
const DELETE: i8 = 1;
const SOURCE_GROUP: i8 = 8;
const SOURCE_DEFAULT: i8 = 5;

fn as_user(name: &str, key: ApiKey, version: i16) -> RequestContext {
    let mut context = RequestContext::internal(key, version);
    context.principal = Principal::User(name.into());
    context
}

async fn alter(
    broker: &InProcess,
    user: &str,
    group: &str,
    changes: &[(&str, i8, Option<&str>)],
) -> (i16, String) {
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = GROUP;
    resource.resource_name = StrBytes::from_string(group.into());
    resource.configs = changes
        .iter()
        .map(|(name, operation, value)| {
            let mut config = AlterableConfig::default();
            config.name = StrBytes::from_string(name.to_string());
            config.config_operation = *operation;
            config.value = value.map(|v| StrBytes::from_string(v.to_string()));
            config
        })
        .collect();
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource];
    match broker.call_in(&as_user(user, ApiKey::IncrementalAlterConfigs, 1), request).await {
        Some(ResponseKind::IncrementalAlterConfigs(response)) => {
            let result = &response.responses[0];
            let message =
                result.error_message.as_ref().map(ToString::to_string).unwrap_or_default();
            (result.error_code, message)
        }
        other => panic!("{other:?}"),
    }
}

/// (error code, name → (value, source)) of a group's configs.
async fn describe(
    broker: &InProcess,
    user: &str,
    group: &str,
) -> (i16, Vec<(String, Option<String>, i8)>) {
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = GROUP;
    resource.resource_name = StrBytes::from_string(group.into());
    resource.configuration_keys = None;
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    match broker.call_in(&as_user(user, ApiKey::DescribeConfigs, 4), request).await {
        Some(ResponseKind::DescribeConfigs(response)) => {
            let result = &response.results[0];
            let configs = result
                .configs
                .iter()
                .map(|c| {
                    (c.name.to_string(), c.value.as_ref().map(ToString::to_string), c.config_source)
                })
                .collect();
            (result.error_code, configs)
        }
        other => panic!("{other:?}"),
    }
}

fn find<'a>(configs: &'a [(String, Option<String>, i8)], name: &str) -> (&'a str, i8) {
    let (_, value, source) = configs.iter().find(|(n, _, _)| n == name).expect(name);
    (value.as_deref().unwrap_or_default(), *source)
}

#[test]
fn group_configs_are_set_described_checked_and_removed_as_kafka_does() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 1).await;
        // A group that does not exist has its defaults: the broker's for consumer.*.
        let (code, configs) = describe(&broker, "anyone", "my-group").await;
        assert_eq!(code, 0);
        let session_default = broker.node.config.consumer_groups.session_timeout_ms.to_string();
        assert_eq!(
            find(&configs, "consumer.session.timeout.ms"),
            (session_default.as_str(), SOURCE_DEFAULT)
        );
        assert_eq!(find(&configs, "share.auto.offset.reset"), ("latest", SOURCE_DEFAULT));
        assert_eq!(find(&configs, "share.record.lock.duration.ms"), ("30000", SOURCE_DEFAULT));

        // librdkafka's 0081 sets exactly this.
        let set = [
            ("consumer.session.timeout.ms", SET, Some("50000")),
            ("share.auto.offset.reset", SET, Some("earliest")),
        ];
        assert_eq!(alter(&broker, "anyone", "my-group", &set).await.0, 0);
        let (_, configs) = describe(&broker, "anyone", "my-group").await;
        assert_eq!(find(&configs, "consumer.session.timeout.ms"), ("50000", SOURCE_GROUP));
        assert_eq!(find(&configs, "share.auto.offset.reset"), ("earliest", SOURCE_GROUP));
        assert_eq!(
            broker.node.metadata().group_configs["my-group"].len(),
            2,
            "in the metadata image"
        );

        // Kafka's checks: an unknown key, a value out of range, a bad reset, a session not
        // longer than the heartbeat interval, a list operation: INVALID_CONFIG (40), nothing set.
        for bad in [
            vec![("no.such.key", SET, Some("1"))],
            vec![("consumer.session.timeout.ms", SET, Some("10"))],
            vec![("share.auto.offset.reset", SET, Some("sometimes"))],
            vec![("consumer.heartbeat.interval.ms", SET, Some("60000"))],
            vec![("share.delivery.count.limit", 2, Some("3"))],
        ] {
            let (code, message) = alter(&broker, "anyone", "my-group", &bad).await;
            assert_eq!(code, 40, "{bad:?}: {message}");
        }
        let (_, configs) = describe(&broker, "anyone", "my-group").await;
        assert_eq!(find(&configs, "consumer.heartbeat.interval.ms").1, SOURCE_DEFAULT);

        let delete = [
            ("consumer.session.timeout.ms", DELETE, None),
            ("share.auto.offset.reset", DELETE, None),
        ];
        assert_eq!(alter(&broker, "anyone", "my-group", &delete).await.0, 0);
        let (_, configs) = describe(&broker, "anyone", "my-group").await;
        assert_eq!(find(&configs, "consumer.session.timeout.ms").1, SOURCE_DEFAULT);
        assert!(
            !broker.node.metadata().group_configs.contains_key("my-group"),
            "no empty entry left"
        );
        broker.close().await;
    });
}

#[test]
fn group_configs_need_alter_and_describe_configs_on_the_group() {
    InProcess::run(|| async {
        let mut config = test_config();
        config.authorizer = broker::config::security::authorizer(
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "User:admin",
            "false",
        )
        .expect("valid");
        let broker = InProcess::start(config, 2).await;
        let set = [("consumer.session.timeout.ms", SET, Some("50000"))];
        assert_eq!(alter(&broker, "alice", "g", &set).await.0, 30, "GROUP_AUTHORIZATION_FAILED");
        assert_eq!(describe(&broker, "alice", "g").await.0, 30);
        assert_eq!(alter(&broker, "admin", "g", &set).await.0, 0);
        assert!(!broker.node.metadata().group_configs["g"].is_empty());
        broker.close().await;
    });
}

#[test]
fn a_consumer_groups_members_get_its_own_heartbeat_interval() {
    InProcess::run(|| async {
        let broker = InProcess::start(test_config(), 3).await;
        let mut topic = CreatableTopic::default();
        topic.name = TopicName(StrBytes::from_static_str("beats"));
        topic.num_partitions = 2;
        topic.replication_factor = 1;
        let mut create = CreateTopicsRequest::default();
        create.topics = vec![topic];
        broker.call_in(&as_user("anyone", ApiKey::CreateTopics, 7), create).await;
        let set = [("consumer.heartbeat.interval.ms", SET, Some("1500"))];
        assert_eq!(alter(&broker, "anyone", "tuned", &set).await.0, 0);
        for (group, want) in
            [("tuned", 1500), ("plain", broker.node.config.consumer_groups.heartbeat_interval_ms)]
        {
            let mut request = ConsumerGroupHeartbeatRequest::default();
            request.group_id = GroupId(StrBytes::from_string(group.into()));
            request.member_id = StrBytes::from_string(format!("{group}-member"));
            request.member_epoch = 0;
            request.rebalance_timeout_ms = 10_000;
            request.subscribed_topic_names =
                Some(vec![TopicName(StrBytes::from_static_str("beats"))]);
            request.topic_partitions = Some(Vec::new());
            let answer = broker
                .call_in(&as_user("anyone", ApiKey::ConsumerGroupHeartbeat, 1), request)
                .await;
            let Some(ResponseKind::ConsumerGroupHeartbeat(response)) = answer else {
                panic!("{answer:?}")
            };
            assert_eq!(response.error_code, 0, "{response:?}");
            // The only member gets every partition at once: it is not reconciling (which
            // would be answered 250 ms), so it is given the group's interval.
            assert_eq!(response.heartbeat_interval_ms, want, "{group}");
        }
        broker.close().await;
    });
}
