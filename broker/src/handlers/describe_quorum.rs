//! DescribeQuorum (key 55, KIP-595 / KIP-836 / KIP-853): the controller quorum's leader, term
//! (Kafka's leader epoch), committed index (the metadata log's high watermark) and each voter's
//! and observer's log end, as the leader knows them. A broker asks its controller thread,
//! which asks the leader when it does not lead. Log indexes stand for Kafka's offsets; a
//! replica's last fetch time is when the leader last heard from its broker (strata's
//! controller does not time each Raft round trip), and it counts as caught up when its log
//! end is the leader's. With no voters configured, the node is a quorum of itself.
//! Errors: a partition other than `__cluster_metadata`-0 gets UNKNOWN_TOPIC_OR_PARTITION; no
//! reachable leader, NOT_LEADER_OR_FOLLOWER (the tool retries).

use super::{error_fields, str_bytes};
use crate::authorization::{AclOperation, Resource};
use crate::controller::protocol::{QuorumState, ReplicaState};
use crate::error::{BrokerError, NONE};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node as QuorumNode, PartitionData, ReplicaState as KafkaReplica, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 2);

/// Kafka's name for the metadata log's topic.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    if !node.allowed(context, AclOperation::Describe, Resource::Cluster) {
        let mut response = DescribeQuorumResponse::default();
        response.error_code =
            crate::error::error_code(&crate::error::BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    let mut response = DescribeQuorumResponse::default();
    response.error_code = NONE;
    let asks_for_the_log = match request.topics.as_slice() {
        [topic] => {
            topic.topic_name.0.as_str() == METADATA_TOPIC
                && matches!(topic.partitions.as_slice(), [partition] if partition.partition_index == 0)
        }
        _ => false,
    };
    let state = if !asks_for_the_log {
        Err(BrokerError::UnknownTopicOrPartition(
            "DescribeQuorum asks for __cluster_metadata partition 0 alone".into(),
        ))
    } else {
        match &node.cluster {
            Some(cluster) => cluster.describe_quorum().await.ok_or_else(|| {
                BrokerError::NotLeader("__cluster_metadata-0: no controller leader answered".into())
            }),
            None => Ok(single_node(node)),
        }
    };
    let now_ms = now_ms();
    let mut partition = PartitionData::default();
    match state {
        Ok(state) => {
            let leader_end = state
                .voters
                .iter()
                .find(|replica| replica.node == state.leader)
                .and_then(|replica| replica.log_end);
            let replicas = |replicas: &[ReplicaState]| -> Vec<KafkaReplica> {
                replicas.iter().map(|replica| kafka_replica(replica, leader_end, now_ms)).collect()
            };
            partition.error_code = NONE;
            partition.leader_id = BrokerId(i32::try_from(state.leader).unwrap_or(-1));
            partition.leader_epoch = i32::try_from(state.term).unwrap_or(i32::MAX);
            partition.high_watermark = offset(state.committed);
            partition.current_voters = replicas(&state.voters);
            partition.observers = replicas(&state.observers);
            response.nodes = voter_nodes(node, &state);
        }
        Err(error) => {
            let (code, message) = error_fields(&error);
            partition.error_code = code;
            partition.error_message = message;
            partition.leader_id = BrokerId(-1);
            partition.leader_epoch = -1;
            partition.high_watermark = -1;
        }
    }
    let mut topic = TopicData::default();
    topic.topic_name = request
        .topics
        .first()
        .map(|t| t.topic_name.clone())
        .unwrap_or_else(|| str_bytes(METADATA_TOPIC).into());
    partition.partition_index =
        request.topics.first().and_then(|t| t.partitions.first()).map_or(0, |p| p.partition_index);
    topic.partitions = vec![partition];
    response.topics = vec![topic];
    response
}

/// A node without voters: itself, leading a log of the image's version.
fn single_node<S: Storage>(node: &Node<S>) -> QuorumState {
    let me = u64::try_from(node.node_id().0).unwrap_or(0);
    let version = node.metadata().version;
    let replica = ReplicaState { node: me, log_end: Some(version), since_contact_ms: Some(0) };
    QuorumState {
        leader: me,
        term: 0,
        committed: Some(version),
        voters: vec![replica],
        observers: Vec::new(),
    }
}

/// Kafka's offset for a log index: the next offset after it (-1 when unknown).
fn offset(index: Option<u64>) -> i64 {
    index.map_or(-1, |index| i64::try_from(index).unwrap_or(i64::MAX).saturating_add(1))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

fn kafka_replica(replica: &ReplicaState, leader_end: Option<u64>, now_ms: i64) -> KafkaReplica {
    let mut out = KafkaReplica::default();
    out.replica_id = BrokerId(i32::try_from(replica.node).unwrap_or(-1));
    out.log_end_offset = offset(replica.log_end);
    let contact = replica
        .since_contact_ms
        .map_or(-1, |ms| now_ms.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX)));
    out.last_fetch_timestamp = contact;
    out.last_caught_up_timestamp =
        if replica.log_end.is_some() && replica.log_end == leader_end { contact } else { -1 };
    out
}

/// Every voter's CONTROLLER endpoint (v2's `nodes`), from `controller.quorum.voters`.
fn voter_nodes<S: Storage>(node: &Node<S>, state: &QuorumState) -> Vec<QuorumNode> {
    let voters = &node.config.cluster.voters;
    state
        .voters
        .iter()
        .filter_map(|replica| {
            let voter = voters.iter().find(|v| u64::try_from(v.id).ok() == Some(replica.node))?;
            let mut listener = Listener::default();
            listener.name = str_bytes("CONTROLLER");
            listener.host = str_bytes(&voter.host);
            listener.port = voter.port;
            let mut out = QuorumNode::default();
            out.node_id = BrokerId(voter.id);
            out.listeners = vec![listener];
            Some(out)
        })
        .collect()
}
