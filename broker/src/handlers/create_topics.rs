//! CreateTopics (key 19): validated here and applied by shard 0, which persists the topic table
//! and opens the partitions on their owner shards before answering.

use super::{nth_result, str_bytes};
use crate::authorization::{AclOperation, Resource};
use crate::error::{BrokerError, NONE};
use crate::metadata::decide::{validate_assignments, CreateTopic, MetadataChange};
use crate::metadata::{config_value, MetadataImage, TopicImage, TOPIC_CONFIGS};
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
    if !topic.assignments.is_empty() {
        topic.assignments.len() as i32
    } else if topic.num_partitions == -1 {
        node.config.num_partitions
    } else {
        topic.num_partitions
    }
}

/// The replication factor a topic gets (-1: the broker's `default.replication.factor`).
fn resolved_factor<S: Storage>(node: &Node<S>, topic: &CreatableTopic) -> i32 {
    match topic.replication_factor {
        -1 => node.config.default_replication_factor,
        factor => i32::from(factor),
    }
}

/// The brokers a manual assignment may name: the live registered ones (this node alone when
/// it is a single node).
pub(crate) fn registered_ids<S: Storage>(node: &Node<S>) -> Vec<i32> {
    node.brokers().iter().map(|broker| broker.node.0).collect()
}

/// A topic created with a manual replica assignment, checked as Kafka does: the counts left
/// to it (-1), then the assignments (partitions 0..n, brokers this cluster has registered);
/// its partition count and each partition's replicas in partition order.
fn manual_partitions<S: Storage>(
    node: &Node<S>,
    topic: &CreatableTopic,
) -> Result<(i32, Vec<Vec<i32>>), BrokerError> {
    if topic.replication_factor != -1 {
        return Err(BrokerError::InvalidRequest(
            "A manual partition assignment was specified, but replication factor was not set \
             to -1."
                .into(),
        ));
    }
    if topic.num_partitions != -1 {
        return Err(BrokerError::InvalidRequest(
            "A manual partition assignment was specified, but numPartitions was not set to -1."
                .into(),
        ));
    }
    let assignments: Vec<(i32, Vec<i32>)> = topic
        .assignments
        .iter()
        .map(|a| (a.partition_index, a.broker_ids.iter().map(|id| id.0).collect()))
        .collect();
    validate_assignments(&assignments, &registered_ids(node), None)?;
    let count = assignments.len() as i32;
    let mut sorted = assignments;
    sorted.sort_unstable_by_key(|(partition, _)| *partition);
    let ids: Vec<i32> = sorted.iter().map(|(partition, _)| *partition).collect();
    if ids != (0..count).collect::<Vec<_>>() {
        return Err(BrokerError::InvalidReplicaAssignment(
            "partitions should be a consecutive 0-based integer sequence".into(),
        ));
    }
    Ok((count, sorted.into_iter().map(|(_, replicas)| replicas).collect()))
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
        match validate_topic(node, context, &request, topic) {
            Ok(create) => {
                early.push(None);
                creates.push(create);
            }
            Err(error) => early.push(Some(error)),
        }
    }
    let results = if creates.is_empty() {
        Vec::new()
    } else {
        node.metadata_router.change(MetadataChange::CreateTopics(creates)).await
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
            describe(node, &image, request.validate_only, version, topic, &mut result);
        }
        response.topics.push(result);
    }
    response
}

/// One requested topic checked (unique, authorized, its counts or assignment) into a creation.
fn validate_topic<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: &CreateTopicsRequest,
    topic: &CreatableTopic,
) -> Result<CreateTopic, BrokerError> {
    let name = topic.name.0.to_string();
    let partitions = resolved_partitions(node, topic);
    let configs = requested_configs(topic);
    let duplicate = request.topics.iter().filter(|other| other.name == topic.name).count() > 1;
    // As Kafka: CREATE on the cluster, or on the topic.
    let may_create = || {
        node.allowed(context, AclOperation::Create, Resource::Cluster)
            || node.allowed(context, AclOperation::Create, Resource::Topic(&name))
    };
    let checked = if duplicate {
        Err(BrokerError::InvalidRequest("Duplicate topic name.".into()))
    } else if !may_create() {
        Err(BrokerError::TopicAuthorizationFailed(name.clone()))
    } else if topic.assignments.is_empty() {
        // -1 is `default.replication.factor`; a single node holds one replica of
        // everything, and a cluster as many as it has live brokers (checked when decided).
        let factor = resolved_factor(node, topic);
        if factor == 0 || factor < -1 || (node.cluster.is_none() && factor > 1) {
            Err(BrokerError::InvalidReplicationFactor(format!(
                "Unable to replicate the partition {factor} time(s): the cluster has {}",
                match node.brokers().len() {
                    1 => "1 broker".to_string(),
                    n => format!("{n} brokers"),
                }
            )))
        } else {
            Ok((partitions, factor.max(1), Vec::new()))
        }
    } else {
        manual_partitions(node, topic).map(|(count, assigned)| (count, 1, assigned))
    };
    let (partitions, replication_factor, assignments) = checked?;
    Ok(CreateTopic {
        name,
        partitions,
        configs,
        validate_only: request.validate_only,
        replication_factor,
        assignments,
    })
}

/// From v5, a created topic's id (v7), counts and configs; validating only, the would-be ones.
fn describe<S: Storage>(
    node: &Node<S>,
    image: &MetadataImage,
    validate_only: bool,
    version: i16,
    topic: &CreatableTopic,
    result: &mut CreatableTopicResult,
) {
    let name = topic.name.0.to_string();
    if let (Some(meta), true) = (image.topic(&name), version >= 5) {
        if version >= 7 {
            result.topic_id = uuid::Uuid::from_bytes(meta.topic_id);
        }
        result.num_partitions = meta.partition_count();
        result.replication_factor = meta.partitions.first().map_or(1, |p| p.replicas.len() as i16);
        result.configs = Some(described_configs(meta));
    } else if validate_only && version >= 5 {
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
        result.replication_factor =
            i16::try_from(resolved_factor(node, topic).max(1)).unwrap_or(i16::MAX);
        result.configs = Some(described_configs(&would_be));
    }
}
