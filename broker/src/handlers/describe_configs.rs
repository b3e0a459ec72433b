//! DescribeConfigs (key 32): topic configs (overrides and defaults) and a few broker configs.

use super::{error_fields, str_bytes};
use crate::error::{BrokerError, NONE};
use crate::metadata::{config_value, TOPIC_CONFIG_KEYS};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
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

pub async fn handle<S: Storage>(
    node: &Node<S>,
    _context: &RequestContext,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
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
                    result.configs = TOPIC_CONFIG_KEYS
                        .iter()
                        .filter(|(key, _)| wanted(key))
                        .map(|(key, _)| {
                            let source = if topic.configs.contains_key(*key) {
                                SOURCE_TOPIC
                            } else {
                                SOURCE_DEFAULT
                            };
                            entry(key, config_value(topic, key), source, false)
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
