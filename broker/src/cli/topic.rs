//! `strata topic create|list|describe|delete|alter-config|move`.

use super::{check, Client};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

fn name(value: &str) -> TopicName {
    TopicName(StrBytes::from_string(value.to_string()))
}

fn parse_pair(value: &str) -> Result<(String, String), String> {
    value
        .split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{value:?} is not key=value"))
}

/// `1:2:3,2:3:1` -> [[1, 2, 3], [2, 3, 1]] (kafka-topics' `--replica-assignment`).
pub fn parse_assignment(text: &str) -> Result<Vec<Vec<i32>>, String> {
    text.split(',')
        .map(|partition| {
            partition
                .split(':')
                .map(|id| {
                    id.trim().parse::<i32>().map_err(|_| {
                        format!("{id:?} in {text:?} is not a broker id (want e.g. 1:2:3,2:3:1)")
                    })
                })
                .collect()
        })
        .collect()
}

pub fn create(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[String],
    assignment: Option<&str>,
) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let mut creatable = CreatableTopic::default();
    creatable.name = name(topic);
    creatable.num_partitions = partitions;
    creatable.replication_factor = replication_factor;
    if let Some(text) = assignment {
        use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
        creatable.num_partitions = -1;
        creatable.replication_factor = -1;
        for (index, replicas) in parse_assignment(text)?.into_iter().enumerate() {
            let mut entry = CreatableReplicaAssignment::default();
            entry.partition_index = index as i32;
            entry.broker_ids = replicas.into_iter().map(BrokerId).collect();
            creatable.assignments.push(entry);
        }
    }
    for pair in configs {
        let (key, value) = parse_pair(pair)?;
        let mut config = CreatableTopicConfig::default();
        config.name = StrBytes::from_string(key);
        config.value = Some(StrBytes::from_string(value));
        creatable.configs.push(config);
    }
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![creatable];
    request.timeout_ms = 30_000;
    match client.call(ApiKey::CreateTopics, 5, RequestKind::CreateTopics(request))? {
        ResponseKind::CreateTopics(response) => {
            for result in response.topics {
                check(
                    result.error_code,
                    result.error_message.as_ref(),
                    &format!("creating {topic}"),
                )?;
                println!("created topic {topic} with {} partitions", result.num_partitions);
            }
            Ok(())
        }
        _ => Err("unexpected response".into()),
    }
}

fn metadata(client: &mut Client, topics: Option<Vec<&str>>) -> Result<MetadataResponse, String> {
    let mut request = MetadataRequest::default();
    request.topics = topics.map(|names| {
        names
            .into_iter()
            .map(|topic| {
                let mut entry = MetadataRequestTopic::default();
                entry.name = Some(name(topic));
                entry
            })
            .collect()
    });
    request.allow_auto_topic_creation = false;
    match client.call(ApiKey::Metadata, 12, RequestKind::Metadata(request))? {
        ResponseKind::Metadata(response) => Ok(response),
        _ => Err("unexpected response".into()),
    }
}

/// The partition count of `topic` (0 when it does not exist; never creates it).
pub fn partition_count(client: &mut Client, topic: &str) -> Result<i32, String> {
    let response = metadata(client, Some(vec![topic]))?;
    Ok(response.topics.iter().find(|t| t.error_code == 0).map_or(0, |t| t.partitions.len() as i32))
}

pub fn list(bootstrap: &str, json_output: bool) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let response = metadata(&mut client, None)?;
    let topics: Vec<(String, usize, usize, bool)> = response
        .topics
        .into_iter()
        .map(|topic| {
            let replicas = topic.partitions.first().map_or(0, |p| p.replica_nodes.len());
            let name = topic.name.map(|n| n.0.to_string()).unwrap_or_default();
            (name, topic.partitions.len(), replicas, topic.is_internal)
        })
        .collect();
    if json_output {
        let rows: Vec<serde_json::Value> = topics
            .iter()
            .map(|(name, partitions, replicas, internal)| {
                serde_json::json!({"topic": name, "partitions": partitions,
                                   "replication_factor": replicas, "internal": internal})
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    println!("{:<40} {:>10} {:>8}", "TOPIC", "PARTITIONS", "REPLICAS");
    for (name, partitions, replicas, _) in topics {
        println!("{name:<40} {partitions:>10} {replicas:>8}");
    }
    Ok(())
}

/// Each partition's leader (-1 for none) and the endpoints of the brokers, from Metadata.
fn leaders(client: &mut Client, topic: &str) -> Result<(Vec<i32>, BTreeMap<i32, String>), String> {
    let response = metadata(client, Some(vec![topic]))?;
    let endpoints = response
        .brokers
        .iter()
        .map(|broker| (broker.node_id.0, format!("{}:{}", broker.host.as_str(), broker.port)))
        .collect();
    let meta = response.topics.into_iter().next().ok_or("no topic in the answer")?;
    check(meta.error_code, None, &format!("describing {topic}"))?;
    let mut partitions = meta.partitions;
    partitions.sort_by_key(|p| p.partition_index);
    Ok((partitions.iter().map(|p| p.leader_id.0).collect(), endpoints))
}

/// Runs `ask` once per leading broker of `topic` with the partitions it leads (connected to
/// it: in a cluster only a partition's leader answers for it); leaderless partitions are
/// left out.
fn per_leader<T>(
    client: &mut Client,
    topic: &str,
    partitions: i32,
    mut ask: impl FnMut(&mut Client, &[i32]) -> Result<Vec<(i32, T)>, String>,
) -> Result<BTreeMap<i32, T>, String> {
    let (leaders, endpoints) = leaders(client, topic)?;
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (index, leader) in leaders.iter().enumerate().take(partitions.max(0) as usize) {
        if *leader >= 0 {
            by_leader.entry(*leader).or_default().push(index as i32);
        }
    }
    let mut out = BTreeMap::new();
    for (leader, indexes) in by_leader {
        let endpoint = endpoints
            .get(&leader)
            .ok_or_else(|| format!("broker {leader} leads {topic} but is not in Metadata"))?;
        let mut leader_client = Client::connect(endpoint)?;
        out.extend(ask(&mut leader_client, &indexes)?);
    }
    Ok(out)
}

/// (log start, log end) offsets of each partition of `topic`, asked of each partition's
/// leader; (-1, -1) for a partition without one.
pub fn offsets(
    client: &mut Client,
    topic: &str,
    partitions: i32,
) -> Result<Vec<(i64, i64)>, String> {
    let starts = offsets_at(client, topic, partitions, -2)?;
    let ends = offsets_at(client, topic, partitions, -1)?;
    Ok(starts.into_iter().zip(ends).collect())
}

/// ListOffsets at `timestamp` (-2 earliest, -1 latest, or a time) for each partition of
/// `topic`, asked of its leader; -1 for a partition without a leader or an offset.
pub fn offsets_at(
    client: &mut Client,
    topic: &str,
    partitions: i32,
    timestamp: i64,
) -> Result<Vec<i64>, String> {
    let found = per_leader(client, topic, partitions, |leader, indexes| {
        let offsets = list_offsets(leader, topic, indexes, timestamp)?;
        Ok(indexes.iter().copied().zip(offsets).collect())
    })?;
    Ok((0..partitions).map(|p| found.get(&p).copied().unwrap_or(-1)).collect())
}

/// ListOffsets at `timestamp` for `indexes` of `topic`, in their order.
fn list_offsets(
    client: &mut Client,
    topic: &str,
    indexes: &[i32],
    timestamp: i64,
) -> Result<Vec<i64>, String> {
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    let mut entry = ListOffsetsTopic::default();
    entry.name = name(topic);
    entry.partitions = indexes
        .iter()
        .map(|index| {
            let mut partition = ListOffsetsPartition::default();
            partition.partition_index = *index;
            partition.timestamp = timestamp;
            partition
        })
        .collect();
    request.topics = vec![entry];
    match client.call(ApiKey::ListOffsets, 5, RequestKind::ListOffsets(request))? {
        ResponseKind::ListOffsets(response) => response
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .map(|p| check(p.error_code, None, "listing offsets").map(|()| p.offset))
            .collect(),
        _ => Err("unexpected response".into()),
    }
}

/// Bytes on disk of each partition (DescribeLogDirs); -1 where the broker did not say.
fn partition_sizes(client: &mut Client, topic: &str, partitions: i32) -> Result<Vec<i64>, String> {
    let mut wanted = describe_log_dirs_request::DescribableLogDirTopic::default();
    wanted.topic = TopicName(StrBytes::from_string(topic.to_string()));
    wanted.partitions = (0..partitions).collect();
    let mut request = DescribeLogDirsRequest::default();
    request.topics = Some(vec![wanted]);
    let mut sizes = vec![-1; partitions.max(0) as usize];
    if let ResponseKind::DescribeLogDirs(response) =
        client.call(ApiKey::DescribeLogDirs, 4, RequestKind::DescribeLogDirs(request))?
    {
        for partition in response
            .results
            .iter()
            .flat_map(|dir| dir.topics.iter())
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
        {
            if let Some(slot) = sizes.get_mut(partition.partition_index.max(0) as usize) {
                *slot = partition.partition_size;
            }
        }
    }
    Ok(sizes)
}

/// One partition as `describe` shows it.
struct PartitionRow {
    partition: i32,
    leader: i32,
    log_start: i64,
    high_watermark: i64,
    size_bytes: i64,
    replicas: Vec<i32>,
    isr: Vec<i32>,
}

pub fn describe(bootstrap: &str, topic: &str, json_output: bool) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let response = metadata(&mut client, Some(vec![topic]))?;
    let meta = response.topics.into_iter().next().ok_or("no topic in the answer")?;
    check(meta.error_code, None, &format!("describing {topic}"))?;
    let partitions = meta.partitions.len() as i32;
    let rows = partition_rows(&mut client, topic, &meta)?;
    let configs = topic_configs(&mut client, topic)?;
    if json_output {
        print_described_json(topic, &meta.topic_id.to_string(), &rows, &configs);
        return Ok(());
    }
    println!("topic {topic}  id {}  partitions {partitions}", meta.topic_id);
    println!(
        "{:>9} {:>7} {:>16} {:>16} {:>14}  {:<12} {:<12}",
        "PARTITION",
        "LEADER",
        "LOG-START-OFFSET",
        "HIGH-WATERMARK",
        "SIZE-BYTES",
        "REPLICAS",
        "ISR"
    );
    let list = |nodes: &[i32]| nodes.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    for row in &rows {
        println!(
            "{:>9} {:>7} {:>16} {:>16} {:>14}  {:<12} {:<12}",
            row.partition,
            row.leader,
            row.log_start,
            row.high_watermark,
            row.size_bytes,
            list(&row.replicas),
            list(&row.isr)
        );
    }
    println!("configs:");
    for (name, value, overridden) in configs {
        let source = if overridden { "(override)" } else { "" };
        println!("  {name}={value} {source}");
    }
    Ok(())
}

/// Each partition of the topic: its leader, offsets and size (asked of its leader), replicas
/// and ISR.
fn partition_rows(
    client: &mut Client,
    topic: &str,
    meta: &metadata_response::MetadataResponseTopic,
) -> Result<Vec<PartitionRow>, String> {
    let partitions = meta.partitions.len() as i32;
    let (leaders, _) = leaders(client, topic)?;
    let sizes = per_leader(client, topic, partitions, |leader, indexes| {
        let sizes = partition_sizes(leader, topic, partitions)?;
        Ok(indexes.iter().map(|i| (*i, sizes.get(*i as usize).copied().unwrap_or(-1))).collect())
    })?;
    let ids = |nodes: &[kafka_protocol::messages::BrokerId]| -> Vec<i32> {
        nodes.iter().map(|node| node.0).collect()
    };
    let mut replicas: Vec<(Vec<i32>, Vec<i32>)> =
        vec![Default::default(); partitions.max(0) as usize];
    for partition in &meta.partitions {
        if let Some(slot) =
            usize::try_from(partition.partition_index).ok().and_then(|i| replicas.get_mut(i))
        {
            *slot = (ids(&partition.replica_nodes), ids(&partition.isr_nodes));
        }
    }
    let mut rows = Vec::new();
    for (index, (start, end)) in offsets(client, topic, partitions)?.into_iter().enumerate() {
        let (replicas, isr) = replicas.get(index).cloned().unwrap_or_default();
        rows.push(PartitionRow {
            partition: index as i32,
            leader: leaders.get(index).copied().unwrap_or(-1),
            log_start: start,
            high_watermark: end,
            size_bytes: sizes.get(&(index as i32)).copied().unwrap_or(-1),
            replicas,
            isr,
        });
    }
    Ok(rows)
}

/// The topic's configs (DescribeConfigs), its overrides and the defaults it takes.
fn topic_configs(client: &mut Client, topic: &str) -> Result<Vec<(String, String, bool)>, String> {
    let mut resource =
        kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_string(topic.to_string());
    resource.configuration_keys = None;
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    // (name, value, whether it is the topic's override).
    let mut configs: Vec<(String, String, bool)> = Vec::new();
    if let ResponseKind::DescribeConfigs(response) =
        client.call(ApiKey::DescribeConfigs, 1, RequestKind::DescribeConfigs(request))?
    {
        for config in response.results.into_iter().flat_map(|r| r.configs) {
            let value = config.value.map(|v| v.to_string()).unwrap_or_default();
            configs.push((config.name.to_string(), value, config.config_source == 1));
        }
    }
    Ok(configs)
}

/// `describe --format json`: the topic, its partitions and its configs, on one line.
fn print_described_json(
    topic: &str,
    topic_id: &str,
    rows: &[PartitionRow],
    configs: &[(String, String, bool)],
) {
    let partitions: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            serde_json::json!({
                "partition": row.partition, "leader": row.leader,
                "log_start_offset": row.log_start, "high_watermark": row.high_watermark,
                "size_bytes": row.size_bytes, "replicas": row.replicas, "isr": row.isr,
            })
        })
        .collect();
    let configs: Vec<serde_json::Value> = configs
        .iter()
        .map(|(name, value, overridden)| {
            serde_json::json!({"name": name, "value": value, "override": overridden})
        })
        .collect();
    let described = serde_json::json!({
        "topic": topic, "topic_id": topic_id,
        "partitions": partitions, "configs": configs,
    });
    println!("{described}");
}

pub fn delete(bootstrap: &str, topic: &str) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    let mut request = DeleteTopicsRequest::default();
    request.topic_names = vec![name(topic)];
    request.timeout_ms = 30_000;
    match client.call(ApiKey::DeleteTopics, 4, RequestKind::DeleteTopics(request))? {
        ResponseKind::DeleteTopics(response) => {
            for result in response.responses {
                check(
                    result.error_code,
                    result.error_message.as_ref(),
                    &format!("deleting {topic}"),
                )?;
            }
            println!("deleted topic {topic}");
            Ok(())
        }
        _ => Err("unexpected response".into()),
    }
}

pub fn alter_config(
    bootstrap: &str,
    topic: &str,
    set: &[String],
    delete: &[String],
) -> Result<(), String> {
    let mut client = Client::connect(bootstrap)?;
    alter_configs(&mut client, 2, topic, set, delete, &format!("altering {topic}"))?;
    println!("altered configs of {topic}");
    Ok(())
}

/// IncrementalAlterConfigs of one resource (2 topic, 4 broker: its id, or "" for the
/// cluster-wide default): `set` KEY=VALUE pairs, `delete` keys.
pub(super) fn alter_configs(
    client: &mut Client,
    resource_type: i8,
    name: &str,
    set: &[String],
    delete: &[String],
    what: &str,
) -> Result<(), String> {
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = resource_type;
    resource.resource_name = StrBytes::from_string(name.to_string());
    for pair in set {
        let (key, value) = parse_pair(pair)?;
        let mut config = AlterableConfig::default();
        config.name = StrBytes::from_string(key);
        config.config_operation = 0;
        config.value = Some(StrBytes::from_string(value));
        resource.configs.push(config);
    }
    for key in delete {
        let mut config = AlterableConfig::default();
        config.name = StrBytes::from_string(key.clone());
        config.config_operation = 1;
        resource.configs.push(config);
    }
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource];
    match client.call(
        ApiKey::IncrementalAlterConfigs,
        0,
        RequestKind::IncrementalAlterConfigs(request),
    )? {
        ResponseKind::IncrementalAlterConfigs(response) => {
            for result in response.responses {
                check(result.error_code, result.error_message.as_ref(), what)?;
            }
            Ok(())
        }
        _ => Err("unexpected response".into()),
    }
}

/// `strata topic add-partitions`: CreatePartitions to the current count plus `added`.
pub fn add_partitions(bootstrap: &str, topic: &str, added: i32) -> Result<(), String> {
    if added < 1 {
        return Err("--num: add at least one partition".into());
    }
    let mut client = Client::connect(bootstrap)?;
    let (leaders, _) = leaders(&mut client, topic)?;
    let count = i32::try_from(leaders.len()).map_err(|e| e.to_string())? + added;
    let mut wanted = create_partitions_request::CreatePartitionsTopic::default();
    wanted.name = name(topic);
    wanted.count = count;
    wanted.assignments = None;
    let mut request = CreatePartitionsRequest::default();
    request.topics = vec![wanted];
    request.timeout_ms = 30_000;
    match client.call(ApiKey::CreatePartitions, 3, RequestKind::CreatePartitions(request))? {
        ResponseKind::CreatePartitions(response) => {
            for result in response.results {
                check(
                    result.error_code,
                    result.error_message.as_ref(),
                    &format!("adding partitions to {topic}"),
                )?;
            }
            println!("{topic}: {} partitions (added {added})", count);
            Ok(())
        }
        _ => Err("unexpected response".into()),
    }
}

/// `strata topic move`: AlterPartitionReassignments of one partition to `target` (`None`:
/// cancel), then with `wait_s` > 0 polls ListPartitionReassignments until the move is done.
pub fn move_partition(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    target: Option<Vec<i32>>,
    wait_s: u64,
) -> Result<(), String> {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    let mut client = Client::connect(bootstrap)?;
    let mut reassignable = ReassignablePartition::default();
    reassignable.partition_index = partition;
    reassignable.replicas = target.clone().map(|ids| ids.into_iter().map(BrokerId).collect());
    let mut entry = ReassignableTopic::default();
    entry.name = name(topic);
    entry.partitions = vec![reassignable];
    let mut request = AlterPartitionReassignmentsRequest::default();
    request.timeout_ms = 30_000;
    request.allow_replication_factor_change = true;
    request.topics = vec![entry];
    let what = format!("{topic}-{partition}");
    match client.call(
        ApiKey::AlterPartitionReassignments,
        0,
        RequestKind::AlterPartitionReassignments(request),
    )? {
        ResponseKind::AlterPartitionReassignments(response) => {
            check(response.error_code, response.error_message.as_ref(), "reassigning")?;
            for result in response.responses.iter().flat_map(|topic| &topic.partitions) {
                check(result.error_code, result.error_message.as_ref(), &what)?;
            }
        }
        _ => return Err("unexpected response".into()),
    }
    match &target {
        Some(target) => println!("moving {what} to brokers {target:?}"),
        None => println!("cancelled the move of {what}"),
    }
    if wait_s == 0 {
        return Ok(());
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(wait_s);
    loop {
        let mut wanted =
            list_partition_reassignments_request::ListPartitionReassignmentsTopics::default();
        wanted.name = name(topic);
        wanted.partition_indexes = vec![partition];
        let mut request = ListPartitionReassignmentsRequest::default();
        request.timeout_ms = 30_000;
        request.topics = Some(vec![wanted]);
        let running = match client.call(
            ApiKey::ListPartitionReassignments,
            0,
            RequestKind::ListPartitionReassignments(request),
        )? {
            ResponseKind::ListPartitionReassignments(response) => {
                check(response.error_code, response.error_message.as_ref(), "listing moves")?;
                response.topics.into_iter().flat_map(|topic| topic.partitions).next()
            }
            _ => return Err("unexpected response".into()),
        };
        let Some(running) = running else {
            println!("moved {what}");
            return Ok(());
        };
        if std::time::Instant::now() >= deadline {
            let ids = |brokers: &[BrokerId]| brokers.iter().map(|b| b.0).collect::<Vec<_>>();
            return Err(format!(
                "{what} still moving after {wait_s} s: replicas {:?}, adding {:?}, removing {:?}",
                ids(&running.replicas),
                ids(&running.adding_replicas),
                ids(&running.removing_replicas)
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::parse_assignment;

    #[test]
    fn replica_assignments_parse_as_kafka_topics_writes_them() {
        assert_eq!(parse_assignment("1:2:3,2:3:1").unwrap(), vec![vec![1, 2, 3], vec![2, 3, 1]]);
        assert_eq!(parse_assignment("7").unwrap(), vec![vec![7]]);
        assert!(parse_assignment("1:x").unwrap_err().contains("\"x\""));
        assert!(parse_assignment("1,,2").is_err());
    }
}
