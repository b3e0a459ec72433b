//! DescribeConfigs (key 32): topic configs (overrides and defaults) and a few broker configs.

use super::{error_fields, str_bytes};
use crate::error::{BrokerError, NONE};
use crate::metadata::topic_config::{default_config, TopicConfigDef};
use crate::metadata::TopicImage;
use crate::metadata::{config_value, TOPIC_CONFIGS};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (1, 4);
/// Kafka's ConfigResource types.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
/// Config sources (DescribeConfigs v1+).
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

fn entry(
    name: &str,
    value: Option<&str>,
    source: i8,
    read_only: bool,
) -> DescribeConfigsResourceResult {
    let mut config = DescribeConfigsResourceResult::default();
    config.name = str_bytes(name);
    config.value = value.map(str_bytes);
    config.config_source = source;
    config.read_only = read_only;
    config
}

/// A topic config's synonyms (DescribeConfigs `include_synonyms`), in Kafka's order: the
/// topic's override, then the default.
fn topic_synonyms(topic: &TopicImage, def: &TopicConfigDef) -> Vec<DescribeConfigsSynonym> {
    let mut synonyms = Vec::new();
    if let Some(value) = topic.configs.get(def.name) {
        let mut synonym = DescribeConfigsSynonym::default();
        synonym.name = str_bytes(def.name);
        synonym.value = Some(str_bytes(value));
        synonym.source = SOURCE_TOPIC;
        synonyms.push(synonym);
    }
    let mut default = DescribeConfigsSynonym::default();
    default.name = str_bytes(def.name);
    default.value = default_config(def.name).map(str_bytes);
    default.source = SOURCE_DEFAULT;
    synonyms.push(default);
    synonyms
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let version = context.api_version;
    let resource_synonyms = request.include_synonyms;
    let image = node.metadata();
    let mut response = DescribeConfigsResponse::default();
    for resource in request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        // Null or empty: every config (Kafka treats both alike).
        let wanted = |key: &str| {
            resource
                .configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == key))
        };
        match resource.resource_type {
            RESOURCE_TOPIC => match image.topic(resource.resource_name.as_str()) {
                Some(topic) => {
                    result.error_code = NONE;
                    result.configs = TOPIC_CONFIGS
                        .iter()
                        .filter(|def| wanted(def.name))
                        .map(|def| {
                            let source = if topic.configs.contains_key(def.name) {
                                SOURCE_TOPIC
                            } else {
                                SOURCE_DEFAULT
                            };
                            let mut config =
                                entry(def.name, config_value(topic, def.name), source, false);
                            if version >= 3 {
                                config.config_type = def.config_type();
                                config.documentation = Some(str_bytes(def.doc));
                            }
                            if version >= 1 && resource_synonyms {
                                config.synonyms = topic_synonyms(topic, def);
                            }
                            config
                        })
                        .collect();
                }
                None => {
                    let error =
                        BrokerError::UnknownTopicOrPartition(resource.resource_name.to_string());
                    (result.error_code, result.error_message) = error_fields(&error);
                }
            },
            RESOURCE_BROKER => {
                result.error_code = NONE;
                let config = &node.config;
                let values = [
                    ("broker.id", config.node_id.to_string()),
                    ("log.dirs", config.data_dir.display().to_string()),
                    ("num.partitions", config.num_partitions.to_string()),
                    ("auto.create.topics.enable", config.auto_create_topics.to_string()),
                    ("socket.request.max.bytes", config.request_bytes_max.to_string()),
                ];
                result.configs = values
                    .iter()
                    .filter(|(key, _)| wanted(key))
                    .map(|(key, value)| entry(key, Some(value), SOURCE_STATIC_BROKER, true))
                    .collect();
            }
            other => {
                let error =
                    BrokerError::InvalidRequest(format!("unsupported resource type {other}"));
                (result.error_code, result.error_message) = error_fields(&error);
            }
        }
        response.results.push(result);
    }
    response
}
