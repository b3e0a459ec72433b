//! Metadata (key 3): brokers (this node), topics with their partitions; auto-creates requested
//! topics when `auto.create.topics.enable` is on and the client allows it.

use super::str_bytes;
use crate::error::{code, error_code, BrokerError};
use crate::router::{request_change, CreateTopic, MetadataChange};
use crate::state::Shard;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 12);

pub async fn handle(shard: &Rc<Shard>, version: i16, request: MetadataRequest) -> MetadataResponse {
    let requested: Option<Vec<String>> = request.topics.map(|topics| {
        topics.into_iter().filter_map(|topic| topic.name.map(|name| name.0.to_string())).collect()
    });
    // Auto-create (Kafka: allowed for v4+ when the client asks; always for older versions).
    let allow_auto_create = version < 4 || request.allow_auto_topic_creation;
    let mut creation_errors = std::collections::HashMap::new();
    if let Some(names) = &requested {
        let snapshot = shard.snapshot();
        let missing: Vec<&String> =
            names.iter().filter(|name| !snapshot.topics.contains_key(*name)).collect();
        if shard.config.auto_create_topics && allow_auto_create && !missing.is_empty() {
            let creates: Vec<CreateTopic> = missing
                .iter()
                .map(|name| CreateTopic {
                    name: (*name).clone(),
                    partitions: shard.config.num_partitions,
                    configs: Default::default(),
                    validate_only: false,
                })
                .collect();
            let results = request_change(shard, MetadataChange::CreateTopics(creates)).await;
            for (name, result) in missing.iter().zip(results) {
                if let Err(error) = result {
                    if !matches!(error, BrokerError::TopicAlreadyExists(_)) {
                        creation_errors.insert((*name).clone(), error_code(&error));
                    }
                }
            }
        }
    }
    let snapshot = shard.snapshot();
    let mut response = MetadataResponse::default();
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(shard.config.node_id);
    broker.host = str_bytes(&shard.config.advertise_host);
    broker.port = shard.config.advertise_port;
    response.brokers = vec![broker];
    if version >= 2 {
        response.cluster_id = Some(str_bytes(&snapshot.cluster_id));
    }
    if version >= 1 {
        response.controller_id = BrokerId(shard.config.node_id);
    }
    let names: Vec<String> = match requested {
        Some(names) => names,
        None => snapshot.topics.keys().cloned().collect(),
    };
    for name in names {
        let mut topic = MetadataResponseTopic::default();
        topic.name = Some(TopicName(str_bytes(&name)));
        match snapshot.topics.get(&name) {
            Some(meta) => {
                topic.is_internal = version >= 1 && name == crate::group::OFFSETS_TOPIC;
                if version >= 10 {
                    topic.topic_id = uuid::Uuid::from_bytes(meta.topic_id);
                }
                topic.partitions = (0..meta.partitions)
                    .map(|index| {
                        let mut partition = MetadataResponsePartition::default();
                        partition.partition_index = index;
                        partition.leader_id = BrokerId(shard.config.node_id);
                        if version >= 7 {
                            partition.leader_epoch = 0;
                        }
                        partition.replica_nodes = vec![BrokerId(shard.config.node_id)];
                        partition.isr_nodes = vec![BrokerId(shard.config.node_id)];
                        partition
                    })
                    .collect();
            }
            None => {
                topic.error_code = match creation_errors.get(&name) {
                    Some(&code) => code,
                    None if crate::metadata::validate_topic_name(&name).is_err() => {
                        code::INVALID_TOPIC_EXCEPTION
                    }
                    None => code::UNKNOWN_TOPIC_OR_PARTITION,
                };
            }
        }
        response.topics.push(topic);
    }
    response
}
