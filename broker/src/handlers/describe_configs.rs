//! DescribeConfigs (key 32): topic configs (overrides, dynamic broker defaults and defaults) and
//! broker configs (static ones, and the dynamic ones per broker or cluster-wide), with Kafka's
//! sources, synonyms (in Kafka's order: dynamic broker, dynamic default, static, default),
//! types and documentation; and group configs (KIP-848's GROUP resource: a group's overrides,
//! else the broker's `group.*` setting or Kafka's default, whether or not the group exists).

use super::{error_fields, str_bytes};
use crate::authorization::{AclOperation, Resource};
use crate::error::{BrokerError, NONE};
use crate::metadata::broker_config::{self, broker_synonym};
use crate::metadata::topic_config::{
    default_config, effective_config, TopicConfigDef, ValueSource,
};
use crate::metadata::TOPIC_CONFIGS;
use crate::metadata::{MetadataImage, TopicImage};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use shard::io::Storage;
use std::collections::BTreeMap;

pub const VERSIONS: (i16, i16) = (1, 4);
/// Kafka's ConfigResource types.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
/// KIP-848's GROUP resource (group configs).
pub const RESOURCE_GROUP: i8 = 32;
/// Config sources (DescribeConfigs v1+, Kafka's `ConfigSource`).
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
const SOURCE_GROUP: i8 = 8;

fn source_code(source: ValueSource) -> i8 {
    match source {
        ValueSource::Topic => SOURCE_TOPIC,
        ValueSource::DynamicBroker => SOURCE_DYNAMIC_BROKER,
        ValueSource::DynamicDefaultBroker => SOURCE_DYNAMIC_DEFAULT_BROKER,
        ValueSource::Default => SOURCE_DEFAULT,
    }
}

fn synonym(name: &str, value: Option<&str>, source: i8) -> DescribeConfigsSynonym {
    let mut synonym = DescribeConfigsSynonym::default();
    synonym.name = str_bytes(name);
    synonym.value = value.map(str_bytes);
    synonym.source = source;
    synonym
}

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
/// topic's override, then its broker synonym's dynamic values, then the default.
fn topic_synonyms(
    image: &MetadataImage,
    node: i32,
    topic: &TopicImage,
    def: &TopicConfigDef,
) -> Vec<DescribeConfigsSynonym> {
    let mut synonyms = Vec::new();
    if let Some(value) = topic.configs.get(def.name) {
        synonyms.push(synonym(def.name, Some(value), SOURCE_TOPIC));
    }
    synonyms.extend(dynamic_synonyms(image, node, broker_synonym(def.name)));
    synonyms.push(synonym(def.name, default_config(def.name), SOURCE_DEFAULT));
    synonyms
}

/// A dynamic broker config's values: this broker's, then the cluster default.
fn dynamic_synonyms(
    image: &MetadataImage,
    node: i32,
    key: Option<&str>,
) -> Vec<DescribeConfigsSynonym> {
    let Some(key) = key else { return Vec::new() };
    let mut synonyms = Vec::new();
    if let Some(value) = image.broker_configs.get(&node.to_string()).and_then(|c| c.get(key)) {
        synonyms.push(synonym(key, Some(value), SOURCE_DYNAMIC_BROKER));
    }
    if let Some(value) = image.broker_configs.get("").and_then(|c| c.get(key)) {
        synonyms.push(synonym(key, Some(value), SOURCE_DYNAMIC_DEFAULT_BROKER));
    }
    synonyms
}

/// The BROKER resource's configs: for this node, its static settings and every dynamic
/// config with the value in effect; for "" (the cluster default), the dynamic defaults set.
fn broker_configs<S: Storage>(
    node: &Node<S>,
    image: &MetadataImage,
    resource: &str,
    wanted: &dyn Fn(&str) -> bool,
    version: i16,
    include_synonyms: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, BrokerError> {
    let id = node.config.node_id;
    let synonyms = version >= 1 && include_synonyms;
    if resource.is_empty() {
        return Ok(cluster_default_configs(image, wanted, synonyms));
    }
    if resource != id.to_string() {
        return Err(BrokerError::InvalidRequest(format!(
            "Unexpected broker id, expected {id} or empty string, but received {resource}"
        )));
    }
    let view = BrokerView { image, id, wanted, synonyms };
    let statics = static_configs(node);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = static_entries(&view, &statics, &mut seen);
    out.extend(dynamic_entries(&view, &mut seen));
    Ok(out)
}

/// What one broker's configs are read from, and which of them the request asks for.
struct BrokerView<'a> {
    image: &'a MetadataImage,
    id: i32,
    wanted: &'a dyn Fn(&str) -> bool,
    /// Synonyms asked for (v1+ with `include_synonyms`).
    synonyms: bool,
}

/// The cluster default ("" resource): the dynamic defaults set.
fn cluster_default_configs(
    image: &MetadataImage,
    wanted: &dyn Fn(&str) -> bool,
    synonyms: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let defaults = image.broker_configs.get("").cloned().unwrap_or_default();
    defaults
        .iter()
        .filter(|(key, _)| wanted(key))
        .map(|(key, value)| {
            let mut config = entry(key, Some(value), SOURCE_DYNAMIC_DEFAULT_BROKER, false);
            if synonyms {
                config.synonyms = vec![synonym(key, Some(value), SOURCE_DYNAMIC_DEFAULT_BROKER)];
            }
            config
        })
        .collect()
}

/// This broker's static settings, by their Kafka names.
fn static_configs<S: Storage>(node: &Node<S>) -> Vec<(String, String)> {
    let config = &node.config;
    let mut statics: Vec<(String, String)> = vec![
        ("broker.id".into(), config.node_id.to_string()),
        ("node.id".into(), config.node_id.to_string()),
        ("log.dirs".into(), config.data_dir.display().to_string()),
        ("num.partitions".into(), config.num_partitions.to_string()),
        ("auto.create.topics.enable".into(), config.auto_create_topics.to_string()),
        ("socket.request.max.bytes".into(), config.request_bytes_max.to_string()),
    ];
    // The topic defaults the configuration file set (or Kafka's), under their broker names.
    for (broker_key, topic_key) in broker_config::TOPIC_DEFAULT_SYNONYMS {
        if let Some(value) = default_config(topic_key) {
            statics.push((broker_key.to_string(), value.to_string()));
        }
    }
    statics
}

/// The static settings asked for, each with the value in effect (a dynamic one first).
fn static_entries(
    view: &BrokerView<'_>,
    statics: &[(String, String)],
    seen: &mut std::collections::BTreeSet<String>,
) -> Vec<DescribeConfigsResourceResult> {
    let mut out = Vec::new();
    for (key, value) in statics {
        if !(view.wanted)(key) || !seen.insert(key.clone()) {
            continue;
        }
        let dynamic = dynamic_synonyms(view.image, view.id, Some(key));
        let read_only = matches!(
            broker_config::dynamic(key, true),
            broker_config::Dynamic::ReadOnly | broker_config::Dynamic::Custom
        );
        let (value, source) = match dynamic.first() {
            Some(first) => (first.value.as_ref().map(|v| v.to_string()), first.source),
            None => (Some(value.clone()), SOURCE_STATIC_BROKER),
        };
        let mut config = entry(key, value.as_deref(), source, read_only);
        if view.synonyms {
            config.synonyms = dynamic;
            config.synonyms.push(synonym(
                key,
                Some(&statics_value(statics, key)),
                SOURCE_STATIC_BROKER,
            ));
        }
        out.push(config);
    }
    out
}

/// Dynamic configs set that have no static setting here (stored ones, custom keys).
fn dynamic_entries(
    view: &BrokerView<'_>,
    seen: &mut std::collections::BTreeSet<String>,
) -> Vec<DescribeConfigsResourceResult> {
    let id = view.id;
    let mut out = Vec::new();
    let set: std::collections::BTreeSet<&String> = view
        .image
        .broker_configs
        .iter()
        .filter(|(resource, _)| resource.is_empty() || **resource == id.to_string())
        .flat_map(|(_, configs)| configs.keys())
        .collect();
    for key in set {
        if !(view.wanted)(key) || !seen.insert(key.clone()) {
            continue;
        }
        let dynamic = dynamic_synonyms(view.image, id, Some(key));
        let Some(first) = dynamic.first() else { continue };
        let value = first.value.as_ref().map(|v| v.to_string());
        let mut config = entry(key, value.as_deref(), first.source, false);
        if view.synonyms {
            config.synonyms = dynamic;
        }
        out.push(config);
    }
    out
}

fn statics_value(statics: &[(String, String)], key: &str) -> String {
    statics.iter().find(|(name, _)| name == key).map(|(_, value)| value.clone()).unwrap_or_default()
}

/// What the request asks to include with each config.
struct Include {
    version: i16,
    /// `include_synonyms`.
    synonyms: bool,
    /// `include_documentation`.
    documentation: bool,
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let include = Include {
        version: context.api_version,
        synonyms: request.include_synonyms,
        documentation: request.include_documentation,
    };
    let image = node.metadata();
    let mut response = DescribeConfigsResponse::default();
    for resource in &request.resources {
        response.results.push(describe_resource(node, context, &image, &include, resource));
    }
    response
}

/// One resource's answer: refused, its configs, or why it has none.
fn describe_resource<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    image: &MetadataImage,
    include: &Include,
    resource: &DescribeConfigsResource,
) -> DescribeConfigsResult {
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
    if let Some(error) = refusal(node, context, resource) {
        (result.error_code, result.error_message) = error_fields(&error);
        return result;
    }
    match resource.resource_type {
        RESOURCE_TOPIC => match image.topic(resource.resource_name.as_str()) {
            Some(topic) => {
                result.error_code = NONE;
                result.configs = topic_configs(node, image, topic, include, &wanted);
            }
            None => {
                let error =
                    BrokerError::UnknownTopicOrPartition(resource.resource_name.to_string());
                (result.error_code, result.error_message) = error_fields(&error);
            }
        },
        RESOURCE_BROKER => {
            let name = resource.resource_name.to_string();
            let (version, synonyms) = (include.version, include.synonyms);
            match broker_configs(node, image, &name, &wanted, version, synonyms) {
                Ok(configs) => {
                    result.error_code = NONE;
                    result.configs = configs;
                }
                Err(error) => (result.error_code, result.error_message) = error_fields(&error),
            }
        }
        RESOURCE_GROUP => {
            result.error_code = NONE;
            result.configs =
                group_configs(node, image, resource.resource_name.as_str(), include, &wanted);
        }
        other => {
            let error = BrokerError::InvalidRequest(format!("unsupported resource type {other}"));
            (result.error_code, result.error_message) = error_fields(&error);
        }
    }
    result
}

/// The authorization error for a resource the principal may not describe, if any.
fn refusal<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    resource: &DescribeConfigsResource,
) -> Option<BrokerError> {
    // As Kafka: DESCRIBE_CONFIGS on the topic, or on the cluster for the BROKER resource.
    let name = resource.resource_name.as_str();
    match resource.resource_type {
        RESOURCE_TOPIC => {
            (!node.allowed(context, AclOperation::DescribeConfigs, Resource::Topic(name)))
                .then(|| BrokerError::TopicAuthorizationFailed(name.to_string()))
        }
        RESOURCE_BROKER => {
            (!node.allowed(context, AclOperation::DescribeConfigs, Resource::Cluster))
                .then_some(BrokerError::ClusterAuthorizationFailed)
        }
        RESOURCE_GROUP => {
            (!node.allowed(context, AclOperation::DescribeConfigs, Resource::Group(name)))
                .then(|| BrokerError::GroupAuthorizationFailed(name.to_string()))
        }
        _ => None,
    }
}

/// The broker's settings group configs default to (`group.consumer.*`), by broker key.
pub fn group_defaults<S: Storage>(node: &Node<S>) -> BTreeMap<String, String> {
    let settings = &node.config.consumer_groups;
    BTreeMap::from([
        ("group.consumer.session.timeout.ms".to_string(), settings.session_timeout_ms.to_string()),
        (
            "group.consumer.heartbeat.interval.ms".to_string(),
            settings.heartbeat_interval_ms.to_string(),
        ),
    ])
}

/// A group's configs asked for (whether or not the group exists, as Kafka answers): each its
/// override (source GROUP_CONFIG) or its default (DEFAULT_CONFIG).
fn group_configs<S: Storage>(
    node: &Node<S>,
    image: &MetadataImage,
    group: &str,
    include: &Include,
    wanted: &dyn Fn(&str) -> bool,
) -> Vec<DescribeConfigsResourceResult> {
    use crate::metadata::group_config;
    let defaults = group_defaults(node);
    let overrides = image.group_configs.get(group);
    group_config::GROUP_CONFIGS
        .iter()
        .filter(|def| wanted(def.name))
        .map(|def| {
            let own = overrides.and_then(|configs| configs.get(def.name));
            let default = group_config::default_of(def.name, &|key| defaults.get(key).cloned());
            let (value, source) = match own {
                Some(value) => (Some(value.clone()), SOURCE_GROUP),
                None => (default.clone(), SOURCE_DEFAULT),
            };
            let mut config = entry(def.name, value.as_deref(), source, false);
            if include.version >= 1 && include.synonyms {
                config.synonyms = own
                    .map(|value| synonym(def.name, Some(value), SOURCE_GROUP))
                    .into_iter()
                    .chain(
                        default
                            .as_deref()
                            .map(|value| synonym(def.name, Some(value), SOURCE_DEFAULT)),
                    )
                    .collect();
            }
            if include.version >= 3 {
                config.config_type = group_config_type(def.kind);
                config.documentation = include.documentation.then(|| str_bytes(def.doc));
            }
            config
        })
        .collect()
}

/// DescribeConfigs' type of a group config (1 boolean, 2 string, 3 int).
fn group_config_type(kind: crate::metadata::group_config::Kind) -> i8 {
    use crate::metadata::group_config::Kind;
    match kind {
        Kind::Boolean => 1,
        Kind::OneOf(_) | Kind::OffsetReset | Kind::TopicName => 2,
        Kind::Integer(..) => 3,
    }
}

/// A topic's configs asked for, each with its value in effect and source.
fn topic_configs<S: Storage>(
    node: &Node<S>,
    image: &MetadataImage,
    topic: &TopicImage,
    include: &Include,
    wanted: &dyn Fn(&str) -> bool,
) -> Vec<DescribeConfigsResourceResult> {
    TOPIC_CONFIGS
        .iter()
        .filter(|def| wanted(def.name))
        .map(|def| {
            let (value, source) = effective_config(image, node.config.node_id, topic, def.name);
            let mut config = entry(def.name, value, source_code(source), false);
            if include.version >= 3 {
                config.config_type = def.config_type();
                // Only when asked, as Kafka (null otherwise).
                config.documentation = include.documentation.then(|| str_bytes(def.doc));
            }
            if include.version >= 1 && include.synonyms {
                config.synonyms = topic_synonyms(image, node.config.node_id, topic, def);
            }
            config
        })
        .collect()
}
