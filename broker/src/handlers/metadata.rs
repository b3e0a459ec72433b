//! Metadata (key 3): brokers (this node), topics with their partitions as placed (leader,
//! leader epoch, replicas); auto-creates requested topics when `auto.create.topics.enable` is
//! on and the client allows it. With the authorizer on, as Kafka: a request for every topic
//! lists those the principal may DESCRIBE; a named topic it may not describe is answered
//! TOPIC_AUTHORIZATION_FAILED, and so is one it may describe but not create (CREATE on the
//! cluster or the topic) when it would be auto-created. From v12 a topic may be asked for by
//! id alone (`asked_topics`).

use super::str_bytes;
use crate::authorization::{self, AclOperation, Resource};
use crate::error::{error_code, BrokerError};
use crate::metadata::decide::NO_LEADER;
use crate::metadata::decide::{CreateTopic, MetadataChange};
use crate::metadata::internal::is_internal;
use crate::metadata::{validate_topic_name, MetadataImage, TopicImage};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use shard::io::Storage;
use std::collections::HashMap;

pub const VERSIONS: (i16, i16) = (0, 12);

/// Creates the requested topics that do not exist (when allowed); the error of each that could
/// not be created.
async fn auto_create<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    version: i16,
    request: &MetadataRequest,
    requested: &[String],
) -> HashMap<String, i16> {
    let mut errors = HashMap::new();
    // Kafka: allowed for v4+ when the client asks; always for older versions.
    let allowed = version < 4 || request.allow_auto_topic_creation;
    if !node.config.auto_create_topics || !allowed {
        return errors;
    }
    let image = node.metadata();
    let may_create = |name: &str| {
        node.allowed(context, AclOperation::Create, Resource::Cluster)
            || node.allowed(context, AclOperation::Create, Resource::Topic(name))
    };
    let mut missing: Vec<&String> = Vec::new();
    for name in requested.iter().filter(|name| image.topic(name).is_none()) {
        if may_create(name) {
            missing.push(name);
        } else {
            errors.insert(
                name.clone(),
                error_code(&BrokerError::TopicAuthorizationFailed(name.clone())),
            );
        }
    }
    if missing.is_empty() {
        return errors;
    }
    let creates = missing
        .iter()
        .map(|name| CreateTopic {
            name: (*name).clone(),
            partitions: node.config.num_partitions,
            configs: Default::default(),
            validate_only: false,
            replication_factor: node.config.default_replication_factor,
            ..Default::default()
        })
        .collect();
    let results = node.metadata_router.change(MetadataChange::CreateTopics(creates)).await;
    for (name, result) in missing.iter().zip(results) {
        if let Err(error) = result {
            if !matches!(error, BrokerError::TopicAlreadyExists(_)) {
                errors.insert((*name).clone(), error_code(&error));
            }
        }
    }
    errors
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: MetadataRequest,
) -> MetadataResponse {
    let version = context.api_version;
    let asked = asked_topics(&node.metadata(), &request, version);
    let describable =
        |name: &str| node.allowed(context, AclOperation::Describe, Resource::Topic(name));
    // Named topics the principal may not describe: refused, never auto-created.
    let (requested, refused): (Option<Vec<String>>, Vec<String>) = match asked.names {
        Some(names) => {
            let (allowed, refused) = names.into_iter().partition(|name| describable(name));
            (Some(allowed), refused)
        }
        None => (None, Vec::new()),
    };
    let (by_id, refused_ids): (Vec<NamedId>, Vec<NamedId>) =
        asked.by_id.into_iter().partition(|(name, _)| describable(name));
    let creation_errors = match &requested {
        Some(names) => auto_create(node, context, version, &request, names).await,
        None => HashMap::new(),
    };
    let image = node.metadata();
    let mut response = MetadataResponse::default();
    describe_cluster(node, context, &image, &request, &mut response);
    let names: Vec<String> = requested
        .unwrap_or_else(|| image.topics.keys().filter(|name| describable(name)).cloned().collect());
    for name in names.iter().chain(by_id.iter().map(|(name, _)| name)) {
        let topic = describe_topic(node, context, &image, &request, name, &creation_errors);
        response.topics.push(topic);
    }
    for name in refused {
        let mut topic = MetadataResponseTopic::default();
        topic.error_code = error_code(&BrokerError::TopicAuthorizationFailed(name.clone()));
        topic.name = Some(TopicName(str_bytes(&name)));
        response.topics.push(topic);
    }
    // Asked for by id: as Kafka, a refused or unknown one is answered by its id, no name.
    for (name, topic_id) in refused_ids {
        let mut topic = MetadataResponseTopic::default();
        topic.error_code = error_code(&BrokerError::TopicAuthorizationFailed(name));
        topic.name = None;
        topic.topic_id = topic_id;
        response.topics.push(topic);
    }
    for topic_id in asked.unknown_ids {
        let mut topic = MetadataResponseTopic::default();
        topic.error_code = error_code(&BrokerError::UnknownTopicId(topic_id.to_string()));
        topic.name = None;
        topic.topic_id = topic_id;
        response.topics.push(topic);
    }
    response
}

/// A topic asked for by id: its name and the id.
type NamedId = (String, uuid::Uuid);

/// The topics a request asks for: by name (`None`: every topic), and from v12 by id alone
/// (a null name), as librdkafka's KIP-848 consumer resolves its assignment's topic ids. An
/// id is resolved against the image; an unknown one is answered UNKNOWN_TOPIC_ID, and a
/// topic asked for by id is never auto-created (Kafka's `handleTopicMetadataRequest`).
struct AskedTopics {
    names: Option<Vec<String>>,
    by_id: Vec<NamedId>,
    unknown_ids: Vec<uuid::Uuid>,
}

fn asked_topics(image: &MetadataImage, request: &MetadataRequest, version: i16) -> AskedTopics {
    let mut asked = AskedTopics { names: None, by_id: Vec::new(), unknown_ids: Vec::new() };
    let Some(topics) = &request.topics else { return asked };
    let mut names = Vec::new();
    for topic in topics {
        match &topic.name {
            Some(name) => names.push(name.0.to_string()),
            // (v10 and v11 carry the field, but Kafka takes ids only from v12.)
            None if version >= 12 && !topic.topic_id.is_nil() => {
                match image.topic_by_id(topic.topic_id.as_bytes()) {
                    Some(known) => asked.by_id.push((known.name.clone(), topic.topic_id)),
                    None => asked.unknown_ids.push(topic.topic_id),
                }
            }
            // Neither a name nor an id (or an id before v12): nothing to describe.
            None => {}
        }
    }
    asked.names = Some(names);
    asked
}

/// The cluster's part of the answer: brokers on this listener, cluster id, controller.
fn describe_cluster<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    image: &MetadataImage,
    request: &MetadataRequest,
    response: &mut MetadataResponse,
) {
    let version = context.api_version;
    response.brokers = node
        .brokers_on(&context.listener)
        .into_iter()
        .map(|endpoint| {
            let mut broker = MetadataResponseBroker::default();
            broker.node_id = BrokerId(endpoint.node.0);
            broker.host = str_bytes(&endpoint.host);
            broker.port = endpoint.port;
            broker.rack = endpoint.rack.as_deref().map(str_bytes);
            broker
        })
        .collect();
    if version >= 2 {
        response.cluster_id = Some(str_bytes(&image.cluster_id));
    }
    if version >= 1 {
        response.controller_id = BrokerId(node.controller_id());
    }
    if (8..=10).contains(&version) {
        response.cluster_authorized_operations = node.authorized_operations(
            context,
            request.include_cluster_authorized_operations,
            authorization::CLUSTER_OPERATIONS,
            Resource::Cluster,
        );
    }
}

/// A topic's answer: its partitions as placed, or why it has none.
fn describe_topic<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    image: &MetadataImage,
    request: &MetadataRequest,
    name: &str,
    creation_errors: &HashMap<String, i16>,
) -> MetadataResponseTopic {
    let version = context.api_version;
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(TopicName(str_bytes(name)));
    match image.topic(name) {
        Some(meta) => {
            topic.is_internal = version >= 1 && is_internal(name);
            if version >= 8 {
                topic.topic_authorized_operations = node.authorized_operations(
                    context,
                    request.include_topic_authorized_operations,
                    authorization::TOPIC_OPERATIONS,
                    Resource::Topic(name),
                );
            }
            if version >= 10 {
                topic.topic_id = uuid::Uuid::from_bytes(meta.topic_id);
            }
            topic.partitions = partitions(image, meta, name, version);
        }
        None => {
            topic.error_code = match creation_errors.get(name) {
                Some(&code) => code,
                None => match validate_topic_name(name) {
                    Err(error) => error_code(&error),
                    Ok(()) => error_code(&BrokerError::UnknownTopicOrPartition(name.to_string())),
                },
            };
        }
    }
    topic
}

/// A topic's partitions: leader, leader epoch, replicas, in-sync and offline replicas.
fn partitions(
    image: &MetadataImage,
    meta: &TopicImage,
    name: &str,
    version: i16,
) -> Vec<MetadataResponsePartition> {
    meta.partitions
        .iter()
        .enumerate()
        .map(|(index, placement)| {
            let mut partition = MetadataResponsePartition::default();
            partition.partition_index = index as i32;
            partition.leader_id = BrokerId(placement.leader.0);
            if placement.leader == NO_LEADER {
                // Its only in-sync replica is fenced: clients wait and ask again.
                partition.error_code =
                    error_code(&BrokerError::LeaderNotAvailable(name.to_string()));
            }
            if version >= 7 {
                partition.leader_epoch = placement.leader_epoch.0;
            }
            let replicas: Vec<BrokerId> =
                placement.replicas.iter().map(|node| BrokerId(node.0)).collect();
            // Until replication (issue #16) only the leader is in sync; a
            // leaderless partition keeps its last in-sync replica, as Kafka does.
            partition.isr_nodes = placement.isr.iter().map(|node| BrokerId(node.0)).collect();
            if version >= 5 && !image.brokers.is_empty() {
                // Replicas on fenced (or unregistered) brokers.
                partition.offline_replicas = placement
                    .replicas
                    .iter()
                    .filter(|node| image.brokers.get(node).is_none_or(|broker| broker.fenced))
                    .map(|node| BrokerId(node.0))
                    .collect();
            }
            partition.replica_nodes = replicas;
            partition
        })
        .collect()
}
