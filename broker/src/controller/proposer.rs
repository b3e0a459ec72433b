//! Committing a proposal through the quorum from any controller: on this node if it leads,
//! else forwarded (once) to the leader it knows, retried while no leader is known, bounded
//! by `PROPOSE_TIMEOUT`.
//! Runs on: the controller thread (tokio).

use super::network::Peer;
use super::protocol::{Committed, ProposeError, Request, Response};
use super::types::{Proposal, Raft};
use openraft::error::{ClientWriteError, RaftError};
use std::time::{Duration, Instant};

/// How long a proposal may wait for a leader and a commit before the broker answers its
/// client with a timeout.
pub const PROPOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Commits `proposal`: on this node if it leads, else on the leader it names (once: a
/// `forwarded` proposal is not passed on again), retrying while no leader is known, for up to
/// `PROPOSE_TIMEOUT`.
pub async fn propose(
    raft: &Raft,
    proposal: Proposal,
    forwarded: bool,
) -> Result<Committed, ProposeError> {
    let deadline = Instant::now() + PROPOSE_TIMEOUT;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        // A leader cut off from the quorum keeps its entry pending: bounded by the deadline
        // (the entry may still commit later, as with any timed-out Kafka request).
        let written = tokio::time::timeout(remaining, raft.client_write(proposal.clone())).await;
        let leader = match written {
            Err(_) => break,
            Ok(Ok(written)) => {
                return Ok(Committed { index: written.log_id.index, applied: written.data });
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
                forward.leader_node
            }
            Ok(Err(error)) => return Err(ProposeError::Failed(error.to_string())),
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        match leader {
            Some(_) if forwarded => {
                return Err(ProposeError::NoLeader("this controller is not the leader".into()));
            }
            Some(node) => {
                let request = Request::Propose { proposal: proposal.clone(), forwarded: true };
                let me = raft.metrics().borrow().id;
                match Peer::new(node.addr.clone(), me).call(&request, remaining).await {
                    Ok(Response::Proposed(Err(ProposeError::NoLeader(_)))) | Err(_) => {}
                    Ok(Response::Proposed(answer)) => return answer,
                    Ok(other) => {
                        return Err(ProposeError::Failed(format!(
                            "the leader answered out of turn: {other:?}"
                        )))
                    }
                }
            }
            None => {}
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(ProposeError::Timeout(format!(
        "no leader committed it within {} s",
        PROPOSE_TIMEOUT.as_secs()
    )))
}
