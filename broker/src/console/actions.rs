//! The console's changes, each one Kafka request (or one per leader or coordinator) made as
//! the user, so ACLs decide exactly as for a client: create a topic (CreateTopics), alter a
//! topic's configs (IncrementalAlterConfigs), delete records up to an offset (DeleteRecords
//! at each leader), reset an empty group's offsets (OffsetCommit at its coordinator, which
//! refuses it if a member joined meanwhile; for a share group AlterShareGroupOffsets, its
//! share-partition start offsets). Each answers `{ok, results: [...]}` with a row per
//! topic, resource or partition, partial failures included.

use super::client::Caller;
use super::http::Request;
use super::topics::{leaders, metadata, offsets_at, EARLIEST, LATEST};
use super::{json_body, ConsoleError, ConsoleResult};
use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, CreateTopicsRequest, DeleteRecordsRequest, GroupId,
    IncrementalAlterConfigsRequest, OffsetCommitRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};
use shard::io::Storage;
use std::collections::BTreeMap;

/// How long a change may wait for the controller or the replicas.
const TIMEOUT_MS: i32 = 30_000;
const TOPIC_RESOURCE: i8 = 2;
const SET: i8 = 0;
const DELETE: i8 = 1;

fn result_row(key: &str, name: Value, code: i16, message: Option<String>) -> Value {
    let error = (code != crate::error::NONE).then(|| crate::error::answered::name(code));
    json!({ key: name, "error": error, "message": message.unwrap_or_default() })
}

fn outcome(results: Vec<Value>) -> Value {
    let ok = results.iter().all(|row| row["error"].is_null());
    json!({ "ok": ok, "results": results })
}

fn text<'a>(body: &'a Value, field: &str) -> Result<&'a str, ConsoleError> {
    body.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| ConsoleError::BadRequest(format!("{field} is required")))
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// `POST /api/topics` `{name, partitions, replication_factor, configs}`.
pub async fn create_topic<S: Storage>(caller: &Caller<'_, S>, request: &Request) -> ConsoleResult {
    let body = json_body(request)?;
    let name = text(&body, "name")?;
    let number =
        |field: &str, default: i64| body.get(field).and_then(Value::as_i64).unwrap_or(default);
    let mut topic = CreatableTopic::default();
    topic.name = topic_name(name);
    topic.num_partitions = i32::try_from(number("partitions", -1))
        .map_err(|_| ConsoleError::BadRequest("partitions".into()))?;
    topic.replication_factor = i16::try_from(number("replication_factor", -1))
        .map_err(|_| ConsoleError::BadRequest("replication_factor".into()))?;
    if let Some(configs) = body.get("configs").and_then(Value::as_object) {
        for (key, value) in configs {
            let mut config = CreatableTopicConfig::default();
            config.name = StrBytes::from_string(key.clone());
            config.value = value.as_str().map(|v| StrBytes::from_string(v.to_string()));
            topic.configs.push(config);
        }
    }
    let mut create = CreateTopicsRequest::default();
    create.topics = vec![topic];
    create.timeout_ms = TIMEOUT_MS;
    let answer = caller.here(create).await?;
    let results = answer
        .topics
        .iter()
        .map(|topic| {
            let message = topic.error_message.as_ref().map(ToString::to_string);
            result_row("name", json!(topic.name.0.to_string()), topic.error_code, message)
        })
        .collect();
    Ok(outcome(results))
}

/// `POST /api/topics/<name>/configs` `{set: {key: value}, delete: [key]}`.
pub async fn alter_configs<S: Storage>(
    caller: &Caller<'_, S>,
    name: &str,
    request: &Request,
) -> ConsoleResult {
    let body = json_body(request)?;
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = TOPIC_RESOURCE;
    resource.resource_name = StrBytes::from_string(name.to_string());
    for (key, value) in body.get("set").and_then(Value::as_object).into_iter().flatten() {
        let value = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
        let mut config = AlterableConfig::default();
        config.name = StrBytes::from_string(key.clone());
        config.config_operation = SET;
        config.value = Some(StrBytes::from_string(value));
        resource.configs.push(config);
    }
    for key in
        body.get("delete").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
    {
        let mut config = AlterableConfig::default();
        config.name = StrBytes::from_string(key.to_string());
        config.config_operation = DELETE;
        resource.configs.push(config);
    }
    if resource.configs.is_empty() {
        return Err(ConsoleError::BadRequest("nothing to set or delete".into()));
    }
    let mut alter = IncrementalAlterConfigsRequest::default();
    alter.resources = vec![resource];
    let answer = caller.here(alter).await?;
    let results = answer
        .responses
        .iter()
        .map(|response| {
            let message = response.error_message.as_ref().map(ToString::to_string);
            result_row(
                "name",
                json!(response.resource_name.to_string()),
                response.error_code,
                message,
            )
        })
        .collect();
    Ok(outcome(results))
}

/// `POST /api/topics/<name>/delete-records` `{partitions: {"0": 25, "1": "hw"}}`.
pub async fn delete_records<S: Storage>(
    caller: &Caller<'_, S>,
    name: &str,
    request: &Request,
) -> ConsoleResult {
    let body = json_body(request)?;
    let asked = body
        .get("partitions")
        .and_then(Value::as_object)
        .ok_or_else(|| ConsoleError::BadRequest("partitions is required".into()))?;
    let mut wanted = BTreeMap::new();
    for (partition, offset) in asked {
        let partition: i32 = partition
            .parse()
            .map_err(|_| ConsoleError::BadRequest(format!("partition {partition:?}")))?;
        // -1: up to the high watermark, as Kafka's DeleteRecords reads it.
        let offset = match offset {
            Value::String(hw) if hw == "hw" => -1,
            other => other.as_i64().ok_or_else(|| {
                ConsoleError::BadRequest(format!("offset of partition {partition}"))
            })?,
        };
        wanted.insert(partition, offset);
    }
    let metadata = metadata(caller, Some(&[name.to_string()])).await?;
    let by_leader = leaders(&metadata);
    let mut results = Vec::new();
    for (leader, partitions) in by_leader {
        let partitions: Vec<DeleteRecordsPartition> = partitions
            .iter()
            .filter_map(|(_, p)| {
                let offset = wanted.remove(p)?;
                let mut partition = DeleteRecordsPartition::default();
                partition.partition_index = *p;
                partition.offset = offset;
                Some(partition)
            })
            .collect();
        if partitions.is_empty() {
            continue;
        }
        let mut topic = DeleteRecordsTopic::default();
        topic.name = topic_name(name);
        topic.partitions = partitions;
        let mut delete = DeleteRecordsRequest::default();
        delete.topics = vec![topic];
        delete.timeout_ms = TIMEOUT_MS;
        let answer = caller.call(leader, delete).await?;
        for partition in answer.topics.iter().flat_map(|t| t.partitions.iter()) {
            let message = Some(format!("low watermark {}", partition.low_watermark));
            results.push(result_row(
                "partition",
                json!(partition.partition_index),
                partition.error_code,
                message,
            ));
        }
    }
    for partition in wanted.keys() {
        results.push(json!({"partition": partition, "error": "UNKNOWN_TOPIC_OR_PARTITION", "message": "no such partition, or it has no leader"}));
    }
    Ok(outcome(results))
}

/// The offsets to reset to: (partition → offset) for `topic`'s `partitions`.
async fn targets<S: Storage>(
    caller: &Caller<'_, S>,
    partitions: &[(String, i32)],
    to: &str,
    value: Option<i64>,
) -> Result<BTreeMap<(String, i32), i64>, ConsoleError> {
    let topics: Vec<String> = partitions.iter().map(|(t, _)| t.clone()).collect();
    let metadata = metadata(caller, Some(&topics)).await?;
    let mut by_leader = leaders(&metadata);
    for keys in by_leader.values_mut() {
        keys.retain(|key| partitions.contains(key));
    }
    let starts = offsets_at(caller, &by_leader, EARLIEST).await;
    let ends = offsets_at(caller, &by_leader, LATEST).await;
    let at_time = match (to, value) {
        ("timestamp", Some(ms)) => Some(offsets_at(caller, &by_leader, ms).await),
        _ => None,
    };
    let mut out = BTreeMap::new();
    for key in partitions {
        let (Some(start), Some(end)) = (starts.get(key), ends.get(key)) else { continue };
        let target = match (to, value) {
            ("earliest", _) => *start,
            ("latest", _) => *end,
            ("offset", Some(offset)) => offset.clamp(*start, *end),
            // No record at or after that time: the end, as kafka-consumer-groups does.
            ("timestamp", Some(_)) => at_time
                .as_ref()
                .and_then(|o| o.get(key))
                .copied()
                .filter(|o| *o >= 0)
                .unwrap_or(*end),
            _ => {
                return Err(ConsoleError::BadRequest(format!(
                    "to = {to:?} (earliest, latest, offset or timestamp with a value)"
                )))
            }
        };
        out.insert(key.clone(), target);
    }
    Ok(out)
}

/// `POST /api/groups/<id>/offsets` `{topic, to, value}`: only for a group without members.
pub async fn reset_offsets<S: Storage>(
    caller: &Caller<'_, S>,
    id: &str,
    request: &Request,
) -> ConsoleResult {
    let body = json_body(request)?;
    let to = text(&body, "to")?;
    let value = body.get("value").and_then(Value::as_i64);
    let topic = body.get("topic").and_then(Value::as_str).filter(|t| !t.is_empty());
    let group = super::groups::describe(caller, id).await?;
    let members = group["members"].as_array().map_or(0, Vec::len);
    if members > 0 {
        return Err(ConsoleError::BadRequest(format!(
            "group {id} has {members} members: stop them before resetting its offsets"
        )));
    }
    let coordinator = group["coordinator"].as_i64().unwrap_or(-1) as i32;
    let mut partitions: Vec<(String, i32)> = group["offsets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| Some((o["topic"].as_str()?.to_string(), o["partition"].as_i64()? as i32)))
        .filter(|(t, _)| topic.is_none_or(|topic| topic == t))
        .collect();
    if let (Some(topic), true) = (topic, partitions.is_empty()) {
        let metadata = metadata(caller, Some(&[topic.to_string()])).await?;
        partitions = metadata
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (topic.to_string(), p.partition_index)))
            .collect();
    }
    let targets = targets(caller, &partitions, to, value).await?;
    if group["type"] == "share" {
        return reset_share_starts(caller, coordinator, id, &targets).await;
    }
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, partition), offset) in &targets {
        let mut commit = OffsetCommitRequestPartition::default();
        commit.partition_index = *partition;
        commit.committed_offset = *offset;
        commit.committed_leader_epoch = -1;
        topics.entry(topic.as_str()).or_default().push(commit);
    }
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(StrBytes::from_string(id.to_string()));
    commit.generation_id_or_member_epoch = -1;
    commit.retention_time_ms = -1;
    commit.topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            let mut topic = OffsetCommitRequestTopic::default();
            topic.name = topic_name(name);
            topic.partitions = partitions;
            topic
        })
        .collect();
    let answer = caller.call(coordinator, commit).await?;
    let targets = &targets;
    let results = answer
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(move |p| {
                let offset = targets
                    .get(&(topic.name.0.to_string(), p.partition_index))
                    .copied()
                    .unwrap_or(-1);
                result_row(
                    "partition",
                    json!(format!("{}-{}", topic.name.0, p.partition_index)),
                    p.error_code,
                    Some(format!("offset {offset}")),
                )
            })
        })
        .collect();
    Ok(outcome(results))
}

/// A share group's reset: AlterShareGroupOffsets at its coordinator, a row per partition.
async fn reset_share_starts<S: Storage>(
    caller: &Caller<'_, S>,
    coordinator: i32,
    id: &str,
    targets: &BTreeMap<(String, i32), i64>,
) -> ConsoleResult {
    let mut topics: BTreeMap<&str, Vec<AlterShareGroupOffsetsRequestPartition>> = BTreeMap::new();
    for ((topic, partition), offset) in targets {
        let mut start = AlterShareGroupOffsetsRequestPartition::default();
        start.partition_index = *partition;
        start.start_offset = *offset;
        topics.entry(topic.as_str()).or_default().push(start);
    }
    let mut request = AlterShareGroupOffsetsRequest::default();
    request.group_id = GroupId(StrBytes::from_string(id.to_string()));
    request.topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            let mut topic = AlterShareGroupOffsetsRequestTopic::default();
            topic.topic_name = topic_name(name);
            topic.partitions = partitions;
            topic
        })
        .collect();
    let answer = caller.call(coordinator, request).await?;
    if answer.error_code != crate::error::NONE {
        let message = answer.error_message.map(|m| m.to_string());
        return Ok(outcome(vec![result_row("group", json!(id), answer.error_code, message)]));
    }
    let results = answer
        .responses
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(move |p| {
                let key = (topic.topic_name.0.to_string(), p.partition_index);
                let offset = targets.get(&key).copied().unwrap_or(-1);
                result_row(
                    "partition",
                    json!(format!("{}-{}", topic.topic_name.0, p.partition_index)),
                    p.error_code,
                    Some(format!("start offset {offset}")),
                )
            })
        })
        .collect();
    Ok(outcome(results))
}
