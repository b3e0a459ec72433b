//! The quorum's state for DescribeQuorum and `strata cluster status`: the leader reads it
//! from openraft's metrics (term, committed index, each replica's matched index) and from its
//! liveness record (when it last heard from each node's broker); any other controller asks
//! the leader over the controller protocol.
//! Runs on: the controller thread (tokio).

use super::liveness::{leader_address, Liveness};
use super::network::Peer;
use super::protocol::{QuorumState, ReplicaState, Request, Response};
use super::types::{NodeId, Raft};
use std::time::Duration;

/// How long a non-leader waits for the leader's answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// The quorum's state, when this node leads it.
pub fn local(raft: &Raft, liveness: &Liveness) -> Option<QuorumState> {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    if !metrics.state.is_leader() || metrics.current_leader != Some(metrics.id) {
        return None;
    }
    let replication = metrics.replication.clone().unwrap_or_default();
    let membership = metrics.membership_config.membership();
    let replica = |node: NodeId| ReplicaState {
        node,
        log_end: if node == metrics.id {
            metrics.last_log_index
        } else {
            replication.get(&node).copied().flatten().map(|id| id.index)
        },
        since_contact_ms: if node == metrics.id {
            Some(0)
        } else {
            i32::try_from(node)
                .ok()
                .and_then(|broker| liveness.since_heard(broker))
                .map(|since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
        },
    };
    let voters: Vec<NodeId> = membership.voter_ids().collect();
    let observers = membership.learner_ids().map(replica).collect();
    Some(QuorumState {
        leader: metrics.id,
        term: metrics.current_term,
        committed: metrics.last_applied.map(|id| id.index),
        voters: voters.into_iter().map(replica).collect(),
        observers,
    })
}

/// The quorum's state from whoever leads it (this node, or the leader it knows); `None` when
/// no leader answers.
pub async fn describe(raft: &Raft, liveness: &Liveness) -> Option<QuorumState> {
    if let Some(state) = local(raft, liveness) {
        return Some(state);
    }
    let (_, address) = leader_address(raft)?;
    let me = raft.metrics().borrow().id;
    match Peer::new(address, me).call(&Request::DescribeQuorum, ASK_TIMEOUT).await {
        Ok(Response::Quorum(state)) => state,
        Ok(other) => {
            tracing::debug!(?other, "DescribeQuorum answered out of turn");
            None
        }
        Err(error) => {
            tracing::debug!(%error, "asking the controller leader for the quorum's state");
            None
        }
    }
}
