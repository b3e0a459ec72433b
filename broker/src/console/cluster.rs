//! `GET /api/cluster`: the brokers (live or fenced, which is the controller), the controller
//! quorum, and the partitions' health, from DescribeCluster, DescribeQuorum and Metadata made
//! here as the user. The quorum needs DESCRIBE on the cluster; without it the page shows
//! `quorum: null` and why.

use super::client::Caller;
use super::topics::metadata;
use super::{ConsoleError, ConsoleResult};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response::ReplicaState;
use kafka_protocol::messages::{DescribeClusterRequest, DescribeQuorumRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};
use shard::io::Storage;

pub async fn cluster<S: Storage>(caller: &Caller<'_, S>) -> ConsoleResult {
    let metadata = metadata(caller, None).await?;
    let (brokers, controller, cluster_id, brokers_error) = match described(caller).await {
        Ok(described) => (described.0, described.1, described.2, Value::Null),
        // Without DESCRIBE on the cluster, the live brokers Metadata shows to everyone.
        Err(error) => {
            let controller = metadata.controller_id.0;
            let brokers = metadata
                .brokers
                .iter()
                .map(|b| {
                    broker_row(b.node_id.0, &b.host, b.port, b.rack.as_deref(), false, controller)
                })
                .collect();
            let id = metadata.cluster_id.as_ref().map(ToString::to_string).unwrap_or_default();
            (brokers, controller, id, json!(error.code_name()))
        }
    };
    let (quorum, quorum_error) = match quorum(caller).await {
        Ok(quorum) => (quorum, Value::Null),
        Err(error) => (Value::Null, json!(error.code_name())),
    };
    Ok(json!({
        "cluster_id": cluster_id,
        "node_id": caller.node.node_id().0,
        "controller_id": controller,
        "brokers": brokers,
        "brokers_error": brokers_error,
        "quorum": quorum,
        "quorum_error": quorum_error,
        "health": health(&metadata),
    }))
}

/// The brokers, fenced ones included (DescribeCluster: DESCRIBE on the cluster), the
/// controller and the cluster id.
async fn described<S: Storage>(
    caller: &Caller<'_, S>,
) -> Result<(Vec<Value>, i32, String), ConsoleError> {
    let mut request = DescribeClusterRequest::default();
    request.include_fenced_brokers = true;
    let described = caller.here(request).await?;
    ConsoleError::check(described.error_code, || "DescribeCluster".into())?;
    let controller = described.controller_id.0;
    let brokers = described
        .brokers
        .iter()
        .map(|b| {
            broker_row(b.broker_id.0, &b.host, b.port, b.rack.as_deref(), b.is_fenced, controller)
        })
        .collect();
    Ok((brokers, controller, described.cluster_id.to_string()))
}

/// A broker as the page shows it.
fn broker_row(
    id: i32,
    host: &str,
    port: i32,
    rack: Option<&str>,
    fenced: bool,
    controller: i32,
) -> Value {
    json!({
        "id": id,
        "host": host,
        "port": port,
        "rack": rack,
        "state": if fenced { "fenced" } else { "live" },
        "controller": id == controller,
    })
}

async fn quorum<S: Storage>(caller: &Caller<'_, S>) -> ConsoleResult {
    let mut partition = PartitionData::default();
    partition.partition_index = 0;
    let mut topic = TopicData::default();
    topic.topic_name = TopicName(StrBytes::from_static_str("__cluster_metadata"));
    topic.partitions = vec![partition];
    let mut request = DescribeQuorumRequest::default();
    request.topics = vec![topic];
    let answer = caller.here(request).await?;
    ConsoleError::check(answer.error_code, || "DescribeQuorum".into())?;
    let partition =
        answer.topics.first().and_then(|topic| topic.partitions.first()).ok_or_else(|| {
            ConsoleError::Unavailable("DescribeQuorum answered no partition".into())
        })?;
    ConsoleError::check(partition.error_code, || "DescribeQuorum".into())?;
    let high_watermark = partition.high_watermark;
    let replicas = |states: &[ReplicaState]| -> Vec<Value> {
        states
            .iter()
            .map(|state| {
                json!({
                    "id": state.replica_id.0,
                    "log_end_offset": state.log_end_offset,
                    "lag": (high_watermark - state.log_end_offset).max(0),
                })
            })
            .collect()
    };
    Ok(json!({
        "leader_id": partition.leader_id.0,
        "leader_epoch": partition.leader_epoch,
        "high_watermark": high_watermark,
        "voters": replicas(&partition.current_voters),
        "observers": replicas(&partition.observers),
    }))
}

/// Partition counts: offline (no leader and every replica offline), leaderless, and
/// under-replicated (an ISR smaller than the replicas).
fn health(metadata: &kafka_protocol::messages::MetadataResponse) -> Value {
    let (mut partitions, mut offline, mut leaderless, mut under_replicated) = (0, 0, 0, 0);
    for topic in &metadata.topics {
        for partition in &topic.partitions {
            partitions += 1;
            if partition.leader_id.0 < 0 {
                leaderless += 1;
                if partition.offline_replicas.len() >= partition.replica_nodes.len() {
                    offline += 1;
                }
            }
            if partition.isr_nodes.len() < partition.replica_nodes.len() {
                under_replicated += 1;
            }
        }
    }
    json!({
        "topics": metadata.topics.len(),
        "partitions": partitions,
        "offline": offline,
        "leaderless": leaderless,
        "under_replicated": under_replicated,
        "healthy": offline == 0 && leaderless == 0 && under_replicated == 0,
    })
}
