//! `GET /api/topics` and `GET /api/topics/<name>`: topics the user may DESCRIBE (Metadata),
//! each partition's log start and high watermark (ListOffsets at its leader), replica sizes
//! (DescribeLogDirs at each broker; DESCRIBE on the cluster, else `null`), and a topic's
//! configs with their sources (DescribeConfigs; overrides are the topic's own).

use super::client::Caller;
use super::{ConsoleError, ConsoleResult};
use futures_util::future::join_all;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, DescribeConfigsRequest, DescribeLogDirsRequest, DescribeProducersRequest,
    ListOffsetsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};
use shard::io::Storage;
use std::collections::{BTreeMap, HashMap};

/// Most topics listed (the rest are left out and `truncated` says so).
pub const TOPICS_LISTED_MAX: usize = 10_000;
/// ListOffsets' earliest and latest timestamps.
pub const EARLIEST: i64 = -2;
pub const LATEST: i64 = -1;
/// DescribeConfigs' resource type of a topic, and the source of a topic's own value.
const TOPIC_RESOURCE: i8 = 2;
const SOURCE_TOPIC: i8 = 1;

/// (topic, partition).
pub type Key = (String, i32);

/// Metadata of all topics (`None`) or of `names`, as the user sees it.
pub async fn metadata<S: Storage>(
    caller: &Caller<'_, S>,
    names: Option<&[String]>,
) -> Result<MetadataResponse, ConsoleError> {
    let mut request = MetadataRequest::default();
    // Looking never creates a topic.
    request.allow_auto_topic_creation = false;
    request.topics = names.map(|names| {
        names
            .iter()
            .map(|name| {
                let mut topic = MetadataRequestTopic::default();
                topic.name = Some(TopicName(StrBytes::from_string(name.clone())));
                topic
            })
            .collect()
    });
    caller.here(request).await
}

/// Each partition's leader, from a Metadata answer.
pub fn leaders(metadata: &MetadataResponse) -> BTreeMap<i32, Vec<Key>> {
    let mut leaders: BTreeMap<i32, Vec<Key>> = BTreeMap::new();
    for topic in &metadata.topics {
        let Some(name) = topic.name.as_ref().map(|n| n.0.to_string()) else { continue };
        for partition in topic.partitions.iter().filter(|p| p.leader_id.0 >= 0) {
            leaders
                .entry(partition.leader_id.0)
                .or_default()
                .push((name.clone(), partition.partition_index));
        }
    }
    leaders
}

/// The offsets at `timestamp` of `partitions`, asked of their leaders; a partition whose
/// leader failed or refused is absent.
pub async fn offsets_at<S: Storage>(
    caller: &Caller<'_, S>,
    leaders: &BTreeMap<i32, Vec<Key>>,
    timestamp: i64,
) -> HashMap<Key, i64> {
    let asks = leaders.iter().map(|(leader, partitions)| {
        let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
        for (topic, partition) in partitions {
            let mut ask = ListOffsetsPartition::default();
            ask.partition_index = *partition;
            ask.current_leader_epoch = -1;
            ask.timestamp = timestamp;
            topics.entry(topic.as_str()).or_default().push(ask);
        }
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(-1);
        request.topics = topics
            .into_iter()
            .map(|(name, partitions)| {
                let mut topic = ListOffsetsTopic::default();
                topic.name = TopicName(StrBytes::from_string(name.to_string()));
                topic.partitions = partitions;
                topic
            })
            .collect();
        caller.call(*leader, request)
    });
    let mut offsets = HashMap::new();
    for answer in join_all(asks).await.into_iter().flatten() {
        for topic in answer.topics {
            for partition in topic.partitions {
                if partition.error_code == crate::error::NONE {
                    offsets.insert(
                        (topic.name.0.to_string(), partition.partition_index),
                        partition.offset,
                    );
                }
            }
        }
    }
    offsets
}

/// Each replica's size on each broker, `None` when DescribeLogDirs was refused.
async fn sizes<S: Storage>(
    caller: &Caller<'_, S>,
    brokers: &[i32],
) -> Option<HashMap<(i32, String, i32), i64>> {
    let asks = brokers.iter().map(|broker| async move {
        let mut request = DescribeLogDirsRequest::default();
        // Every topic's (the default asks for none).
        request.topics = None;
        (*broker, caller.call(*broker, request).await)
    });
    let mut sizes = HashMap::new();
    let mut refused = true;
    for (broker, answer) in join_all(asks).await {
        let Ok(answer) = answer else { continue };
        if answer.error_code != crate::error::NONE {
            continue;
        }
        refused = false;
        for dir in answer.results {
            for topic in dir.topics {
                for partition in topic.partitions {
                    let key = (broker, topic.name.0.to_string(), partition.partition_index);
                    *sizes.entry(key).or_default() += partition.partition_size;
                }
            }
        }
    }
    (!refused).then_some(sizes)
}

/// Partition figures shared by the list and a topic's page.
struct Figures {
    starts: HashMap<Key, i64>,
    ends: HashMap<Key, i64>,
    sizes: Option<HashMap<(i32, String, i32), i64>>,
}

async fn figures<S: Storage>(caller: &Caller<'_, S>, metadata: &MetadataResponse) -> Figures {
    let leaders = leaders(metadata);
    let brokers: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
    let (starts, (ends, sizes)) = futures_lite::future::zip(
        offsets_at(caller, &leaders, EARLIEST),
        futures_lite::future::zip(offsets_at(caller, &leaders, LATEST), sizes(caller, &brokers)),
    )
    .await;
    Figures { starts, ends, sizes }
}

impl Figures {
    fn size(&self, leader: i32, topic: &str, partition: i32) -> Option<i64> {
        let sizes = self.sizes.as_ref()?;
        sizes.get(&(leader, topic.to_string(), partition)).copied()
    }
}

/// `GET /api/topics`.
pub async fn list<S: Storage>(caller: &Caller<'_, S>) -> ConsoleResult {
    let mut metadata = metadata(caller, None).await?;
    let truncated = metadata.topics.len() > TOPICS_LISTED_MAX;
    metadata.topics.truncate(TOPICS_LISTED_MAX);
    let figures = figures(caller, &metadata).await;
    let topics: Vec<Value> = metadata
        .topics
        .iter()
        .filter_map(|topic| {
            let name = topic.name.as_ref()?.0.to_string();
            let (mut messages, mut end_offsets, mut size, mut under) = (0i64, 0i64, Some(0i64), 0);
            for partition in &topic.partitions {
                let key = (name.clone(), partition.partition_index);
                let end = figures.ends.get(&key).copied().unwrap_or(0);
                let start = figures.starts.get(&key).copied().unwrap_or(end);
                messages += (end - start).max(0);
                end_offsets += end;
                let replica = figures.size(partition.leader_id.0, &name, partition.partition_index);
                size = size.zip(replica.or(figures.sizes.as_ref().map(|_| 0))).map(|(a, b)| a + b);
                under += usize::from(partition.isr_nodes.len() < partition.replica_nodes.len());
            }
            Some(json!({
                "name": name,
                "internal": topic.is_internal,
                "partitions": topic.partitions.len(),
                "replication_factor": topic.partitions.first().map_or(0, |p| p.replica_nodes.len()),
                "size_bytes": size,
                "messages": messages,
                "end_offsets": end_offsets,
                "under_replicated": under,
            }))
        })
        .collect();
    Ok(json!({ "topics": topics, "truncated": truncated }))
}

/// `GET /api/topics/<name>`.
pub async fn describe<S: Storage>(caller: &Caller<'_, S>, name: &str) -> ConsoleResult {
    let metadata = metadata(caller, Some(&[name.to_string()])).await?;
    let topic = metadata
        .topics
        .iter()
        .find(|topic| topic.name.as_ref().is_some_and(|n| &*n.0 == name))
        .ok_or_else(|| ConsoleError::NotFound(format!("topic {name}")))?;
    ConsoleError::check(topic.error_code, || format!("topic {name}"))?;
    let figures = figures(caller, &metadata).await;
    let partitions: Vec<Value> = topic
        .partitions
        .iter()
        .map(|partition| {
            let key = (name.to_string(), partition.partition_index);
            let ids = |nodes: &[BrokerId]| nodes.iter().map(|n| n.0).collect::<Vec<_>>();
            json!({
                "partition": partition.partition_index,
                "leader": partition.leader_id.0,
                "leader_epoch": partition.leader_epoch,
                "replicas": ids(&partition.replica_nodes),
                "isr": ids(&partition.isr_nodes),
                "offline_replicas": ids(&partition.offline_replicas),
                "log_start": figures.starts.get(&key),
                "high_watermark": figures.ends.get(&key),
                "size_bytes": figures.size(partition.leader_id.0, name, partition.partition_index),
            })
        })
        .collect();
    let (configs, configs_error) = match configs(caller, name).await {
        Ok(configs) => (configs, Value::Null),
        Err(error) => (json!([]), json!(error.code_name())),
    };
    let (producers, producers_error) = match producers(caller, &metadata).await {
        Ok(producers) => (json!(producers), Value::Null),
        Err(error) => (Value::Null, json!(error.code_name())),
    };
    Ok(json!({
        "name": name,
        "internal": topic.is_internal,
        "topic_id": topic.topic_id.to_string(),
        "partitions": partitions,
        "configs": configs,
        "configs_error": configs_error,
        "producers": producers,
        "producers_error": producers_error,
    }))
}

/// The active producers of a topic's partitions (DescribeProducers at each leader: READ on the
/// topic).
async fn producers<S: Storage>(
    caller: &Caller<'_, S>,
    metadata: &MetadataResponse,
) -> Result<Vec<Value>, ConsoleError> {
    let asks = leaders(metadata).into_iter().map(|(leader, partitions)| {
        let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in partitions {
            topics.entry(topic).or_default().push(partition);
        }
        let mut request = DescribeProducersRequest::default();
        request.topics = topics
            .into_iter()
            .map(|(name, partitions)| {
                let mut topic = TopicRequest::default();
                topic.name = TopicName(StrBytes::from_string(name));
                topic.partition_indexes = partitions;
                topic
            })
            .collect();
        caller.call(leader, request)
    });
    let mut producers = Vec::new();
    for answer in join_all(asks).await {
        for topic in answer?.topics {
            for partition in topic.partitions {
                ConsoleError::check(partition.error_code, || {
                    format!("producers of {}", topic.name.0)
                })?;
                producers.extend(partition.active_producers.iter().map(|producer| {
                    json!({
                        "partition": partition.partition_index,
                        "producer_id": producer.producer_id.0,
                        "producer_epoch": producer.producer_epoch,
                        "last_sequence": producer.last_sequence,
                        "last_timestamp": producer.last_timestamp,
                        "current_txn_start_offset": producer.current_txn_start_offset,
                    })
                }));
            }
        }
    }
    Ok(producers)
}

/// A topic's configs, each with its source and whether the topic overrides it.
async fn configs<S: Storage>(caller: &Caller<'_, S>, name: &str) -> ConsoleResult {
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = TOPIC_RESOURCE;
    resource.resource_name = StrBytes::from_string(name.to_string());
    resource.configuration_keys = None;
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    let answer = caller.here(request).await?;
    let result = answer
        .results
        .into_iter()
        .next()
        .ok_or_else(|| ConsoleError::Unavailable("DescribeConfigs answered nothing".into()))?;
    ConsoleError::check(result.error_code, || format!("configs of {name}"))?;
    let configs: Vec<Value> = result
        .configs
        .iter()
        .map(|config| {
            json!({
                "name": config.name.to_string(),
                "value": config.value.as_ref().map(ToString::to_string),
                "source": source_name(config.config_source),
                "override": config.config_source == SOURCE_TOPIC,
                "sensitive": config.is_sensitive,
                "read_only": config.read_only,
            })
        })
        .collect();
    Ok(json!(configs))
}

/// DescribeConfigs' config sources by name.
fn source_name(source: i8) -> &'static str {
    match source {
        1 => "topic",
        2 => "broker",
        3 => "cluster default",
        4 => "broker config file",
        5 => "default",
        8 => "group",
        _ => "other",
    }
}
