//! CreateTopics (key 19): validated here and applied by shard 0, which persists the topic table
//! and opens the partitions on their owner shards before answering.

use super::{nth_result, str_bytes};
use crate::error::{BrokerError, NONE};
use crate::metadata::decide::{CreateTopic, MetadataChange};
use crate::metadata::{config_value, TopicImage, TOPIC_CONFIGS};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use shard::io::Storage;
use std::collections::BTreeMap;

pub const VERSIONS: (i16, i16) = (2, 7);

/// The partition count a topic gets (-1: the broker's `num.partitions`).
fn resolved_partitions<S: Storage>(node: &Node<S>, topic: &CreatableTopic) -> i32 {
    if topic.num_partitions == -1 {
        node.config.num_partitions
    } else {
        topic.num_partitions
    }
}

fn requested_configs(topic: &CreatableTopic) -> BTreeMap<String, String> {
    topic
        .configs
        .iter()
        .filter_map(|config| {
            config.value.as_ref().map(|value| (config.name.to_string(), value.to_string()))
        })
        .collect()
}

/// Every topic config with its value and source (1: the topic's, 5: a default).
fn described_configs(topic: &TopicImage) -> Vec<CreatableTopicConfigs> {
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let mut config = CreatableTopicConfigs::default();
            config.name = str_bytes(def.name);
            config.value = config_value(topic, def.name).map(str_bytes);
            config.config_source = if topic.configs.contains_key(def.name) { 1 } else { 5 };
            config
        })
        .collect()
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let version = context.api_version;
    let mut creates = Vec::new();
    let mut early: Vec<Option<BrokerError>> = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let partitions = resolved_partitions(node, topic);
        let configs = requested_configs(topic);
        // A single node holds one replica of everything: factor 1, or -1 for the default.
        if topic.replication_factor != -1 && topic.replication_factor != 1 {
            early.push(Some(BrokerError::InvalidReplicationFactor(format!(
                "replication factor {} on a single broker",
                topic.replication_factor
            ))));
            continue;
        }
        if !topic.assignments.is_empty() {
            early.push(Some(BrokerError::InvalidRequest(
                "manual replica assignment is not supported".into(),
            )));
            continue;
        }
        early.push(None);
        creates.push(CreateTopic {
            name,
            partitions,
            configs,
            validate_only: request.validate_only,
        });
    }
    let results = if creates.is_empty() {
        Vec::new()
    } else {
        node.change_metadata(MetadataChange::CreateTopics(creates)).await
    };
    let image = node.metadata();
    let mut response = CreateTopicsResponse::default();
    let mut next_result = 0;
    for (topic, early_error) in request.topics.iter().zip(early) {
        let mut result = CreatableTopicResult::default();
        result.name = topic.name.clone();
        let (error_code, message) = match early_error {
            Some(error) => super::error_fields(&error),
            None => {
                let fields = nth_result(&results, next_result);
                next_result += 1;
                fields
            }
        };
        result.error_code = error_code;
        result.error_message = message;
        result.num_partitions = -1;
        result.replication_factor = -1;
        if error_code == NONE {
            let name = topic.name.0.to_string();
            if let (Some(meta), true) = (image.topic(&name), version >= 5) {
                if version >= 7 {
                    result.topic_id = uuid::Uuid::from_bytes(meta.topic_id);
                }
                result.num_partitions = meta.partition_count();
                result.replication_factor = 1;
                result.configs = Some(described_configs(meta));
            } else if request.validate_only && version >= 5 {
                // The topic it would be (Kafka's controller draws an id it never records).
                let would_be = TopicImage {
                    name: topic.name.0.to_string(),
                    topic_id: *uuid::Uuid::new_v4().as_bytes(),
                    partitions: Vec::new(),
                    configs: requested_configs(topic),
                };
                if version >= 7 {
                    result.topic_id = uuid::Uuid::from_bytes(would_be.topic_id);
                }
                result.num_partitions = resolved_partitions(node, topic);
                result.replication_factor = 1;
                result.configs = Some(described_configs(&would_be));
            }
        }
        response.topics.push(result);
    }
    response
}
