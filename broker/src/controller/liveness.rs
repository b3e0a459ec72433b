//! Broker liveness: heartbeats and fencing (KIP-631's broker lifecycle).
//!
//! Every node's controller thread heartbeats for its broker to the active controller every
//! `broker.heartbeat.interval.ms`. The active controller (the Raft leader) remembers when it
//! last heard from each broker, in memory only, and from that decides: a live broker silent
//! for `broker.session.timeout.ms` is fenced (`metadata::decide::fence_broker`: it leaves
//! Metadata and its partitions get new leaders); a fenced broker heard from again, with the
//! incarnation it registered with, is unfenced (`unfence_broker`). A controller that has just
//! become leader counts every broker as heard from at that moment, so a leader change never
//! fences brokers that were heartbeating to the old leader.
//! It also finishes reassignments whose target replicas are all in sync
//! (`metadata::reassign::finish_reassignments`).
//! With `auto.leader.rebalance.enable`, the leader also runs preferred elections every
//! `leader.imbalance.check.interval.seconds` (`metadata::elect::preferred_elections`).
//! Controlled shutdown: a broker that got SIGTERM asks the leader to fence it at once
//! (`controlled_shutdown`), so its partitions get new leaders before it goes, not a session
//! timeout after; its later heartbeats from that incarnation are ignored, and it is unfenced
//! when it restarts, registers a new incarnation and heartbeats.
//! Decisions are proposed on the condition that the image has not moved (as brokers'
//! changes are), and are retried at the next check when refused.
//! Runs on: the controller thread (tokio).

use super::network::Peer;
use super::proposer::propose;
use super::protocol::{ProposeError, Request, Response};
use super::state_machine::ImageCell;
use super::types::{NodeId, Proposal, Raft};
use crate::metadata::{decide, elect, reassign};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wire::ids::NodeId as BrokerId;

/// How often the leader looks for brokers to fence or unfence.
const CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// What the active controller heard from each broker.
#[derive(Default)]
pub struct Liveness {
    heard: Mutex<HashMap<i32, (Instant, [u8; 16])>>,
    /// Brokers in controlled shutdown, by the incarnation that asked: their heartbeats no
    /// longer count (a restarted broker registers a new incarnation).
    stopping: Mutex<HashMap<i32, [u8; 16]>>,
}

impl Liveness {
    pub fn heartbeat(&self, node: i32, incarnation: [u8; 16]) {
        let stopping = self.stopping.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if stopping.get(&node) == Some(&incarnation) {
            return;
        }
        drop(stopping);
        self.lock().insert(node, (Instant::now(), incarnation));
    }

    /// A broker in controlled shutdown: forgotten, and its later heartbeats ignored.
    fn stopping(&self, node: i32, incarnation: [u8; 16]) {
        self.stopping
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(node, incarnation);
        self.lock().remove(&node);
    }

    /// How long ago the leader last heard from `node`'s broker.
    pub fn since_heard(&self, node: i32) -> Option<Duration> {
        self.lock().get(&node).map(|(at, _)| at.elapsed())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, (Instant, [u8; 16])>> {
        self.heard.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn is_leader(raft: &Raft, me: NodeId) -> bool {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    metrics.current_leader == Some(me) && metrics.state.is_leader()
}

/// The leader's side, forever: fence the silent, unfence the returned.
pub async fn watch(
    raft: Raft,
    me: NodeId,
    images: Arc<ImageCell>,
    liveness: Arc<Liveness>,
    session: Duration,
    rebalance: Option<Duration>,
) {
    let mut leading_since: Option<Instant> = None;
    let mut rebalanced = Instant::now();
    loop {
        tokio::time::sleep(CHECK_INTERVAL).await;
        if !is_leader(&raft, me) {
            leading_since = None;
            continue;
        }
        let since = *leading_since.get_or_insert_with(Instant::now);
        let (image, _) = images.latest();
        let now = Instant::now();
        let mut decided = Vec::new();
        {
            let heard = liveness.lock();
            for (node, broker) in &image.brokers {
                let last = heard.get(&node.0);
                let heard_at = last.map_or(since, |(at, _)| (*at).max(since));
                let silent = now.duration_since(heard_at) > session;
                let current = last.is_some_and(|(at, incarnation)| {
                    *incarnation == broker.registration.incarnation
                        && now.duration_since(*at) <= session
                });
                if !broker.fenced && silent {
                    tracing::warn!(broker = node.0, "fencing a broker without heartbeats");
                    decided = decide::fence_broker(&image, *node);
                } else if broker.fenced && current {
                    tracing::info!(broker = node.0, "unfencing a broker whose heartbeats are back");
                    decided = decide::unfence_broker(&image, *node);
                }
                if !decided.is_empty() {
                    break;
                }
            }
        }
        if decided.is_empty() {
            // Reassignments whose target replicas have all joined the ISR.
            decided = reassign::finish_reassignments(&image);
            if !decided.is_empty() {
                tracing::info!(partitions = decided.len(), "reassignments finished");
            }
        }
        if decided.is_empty() {
            // The automatic leader rebalance: back to the preferred replicas, every interval.
            match rebalance {
                Some(interval) if rebalanced.elapsed() >= interval => {
                    rebalanced = Instant::now();
                    decided = elect::preferred_elections(&image);
                    if !decided.is_empty() {
                        tracing::info!(
                            partitions = decided.len(),
                            "leader rebalance: preferred replicas lead again"
                        );
                    }
                }
                _ => {}
            }
        }
        if decided.is_empty() {
            continue;
        }
        let proposal = Proposal { expected_version: Some(image.version), records: decided };
        if let Err(error) = propose(&raft, proposal, true).await {
            tracing::warn!(%error, "a fencing decision was not committed; deciding again");
        }
    }
}

/// How many times a controlled shutdown decides again when its fence was refused as stale.
const SHUTDOWN_DECISIONS_MAX: usize = 5;

/// The leader's side of a controlled shutdown: `node` (of `incarnation`) stops being counted
/// as alive and is fenced (`decide::fence_broker`: its leaderships move away). Returns the
/// log index of the fencing entry, `None` when the broker was fenced already or has
/// re-registered since.
pub async fn fence_for_shutdown(
    raft: &Raft,
    images: &ImageCell,
    liveness: &Liveness,
    node: BrokerId,
    incarnation: [u8; 16],
) -> Result<Option<u64>, ProposeError> {
    liveness.stopping(node.0, incarnation);
    for _ in 0..SHUTDOWN_DECISIONS_MAX {
        let (image, _) = images.latest();
        let registered = image.brokers.get(&node).map(|b| b.registration.incarnation);
        if registered != Some(incarnation) {
            return Ok(None);
        }
        let records = decide::fence_broker(&image, node);
        if records.is_empty() {
            return Ok(None);
        }
        let proposal = Proposal { expected_version: Some(image.version), records };
        let committed = propose(raft, proposal, true).await?;
        if committed.applied.refused.is_none() {
            tracing::info!(broker = node.0, index = committed.index, "controlled shutdown: fenced");
            return Ok(Some(committed.index));
        }
    }
    Err(ProposeError::Failed("the metadata kept changing under the controlled shutdown".into()))
}

/// The broker's side of a controlled shutdown: asks whoever leads to fence this broker (on
/// this node if it leads), retrying while no leader answers, until `deadline`.
pub async fn controlled_shutdown(
    raft: &Raft,
    me: NodeId,
    broker: (BrokerId, [u8; 16]),
    images: &ImageCell,
    liveness: &Liveness,
    deadline: Instant,
) -> Result<Option<u64>, ProposeError> {
    let mut peer: Option<(NodeId, Peer)> = None;
    loop {
        match leader_address(raft) {
            Some((leader, _)) if leader == me => {
                let fencing = fence_for_shutdown(raft, images, liveness, broker.0, broker.1);
                match tokio::time::timeout_at(deadline.into(), fencing).await {
                    Ok(Err(ProposeError::NoLeader(_))) => {}
                    Ok(outcome) => return outcome,
                    Err(_) => break,
                }
            }
            Some((leader, address)) => {
                if peer.as_ref().is_none_or(|(to, _)| *to != leader) {
                    peer = Some((leader, Peer::new(address, me)));
                }
                if let Some((_, peer)) = peer.as_mut() {
                    let request =
                        Request::ControlledShutdown { node: broker.0 .0, incarnation: broker.1 };
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    match peer.call(&request, remaining).await {
                        Ok(Response::ShutDown(Err(ProposeError::NoLeader(_)))) | Err(_) => {}
                        Ok(Response::ShutDown(outcome)) => return outcome,
                        Ok(other) => {
                            tracing::debug!(?other, "a controlled shutdown answered out of turn")
                        }
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
    Err(ProposeError::Timeout("no controller fenced this broker in time".into()))
}

/// The leader this node knows, with its controller address.
pub fn leader_address(raft: &Raft) -> Option<(NodeId, String)> {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    metrics.current_leader.and_then(|leader| {
        let node = metrics.membership_config.membership().get_node(&leader)?;
        Some((leader, node.addr.clone()))
    })
}

/// A broker's side, forever: heartbeat to whoever leads, every `interval`.
pub async fn heartbeat(
    raft: Raft,
    me: NodeId,
    broker: (BrokerId, [u8; 16]),
    liveness: Arc<Liveness>,
    interval: Duration,
) {
    let mut peer: Option<(NodeId, Peer)> = None;
    loop {
        match leader_address(&raft) {
            Some((leader, _)) if leader == me => liveness.heartbeat(broker.0 .0, broker.1),
            Some((leader, address)) => {
                if peer.as_ref().is_none_or(|(to, _)| *to != leader) {
                    peer = Some((leader, Peer::new(address, me)));
                }
                if let Some((_, peer)) = peer.as_mut() {
                    let request = Request::Heartbeat { node: broker.0 .0, incarnation: broker.1 };
                    match peer.call(&request, interval.max(Duration::from_millis(500))).await {
                        Ok(Response::Heartbeat(_)) => {}
                        Ok(other) => tracing::debug!(?other, "a heartbeat answered out of turn"),
                        Err(error) => {
                            tracing::debug!(%error, "a heartbeat to the controller failed")
                        }
                    }
                }
            }
            None => {}
        }
        tokio::time::sleep(interval).await;
    }
}
