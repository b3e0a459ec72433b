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
//! Decisions are proposed on the condition that the image has not moved (as brokers'
//! changes are), and are retried at the next check when refused.
//! Runs on: the controller thread (tokio).

use super::network::Peer;
use super::proposer::propose;
use super::protocol::{Request, Response};
use super::state_machine::ImageCell;
use super::types::{NodeId, Proposal, Raft};
use crate::metadata::decide;
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
}

impl Liveness {
    pub fn heartbeat(&self, node: i32, incarnation: [u8; 16]) {
        self.lock().insert(node, (Instant::now(), incarnation));
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
) {
    let mut leading_since: Option<Instant> = None;
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
            continue;
        }
        let proposal = Proposal { expected_version: Some(image.version), records: decided };
        if let Err(error) = propose(&raft, proposal, true).await {
            tracing::warn!(%error, "a fencing decision was not committed; deciding again");
        }
    }
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
        let leader = {
            let metrics = raft.metrics();
            let metrics = metrics.borrow();
            metrics.current_leader.and_then(|leader| {
                let node = metrics.membership_config.membership().get_node(&leader)?;
                Some((leader, node.addr.clone()))
            })
        };
        match leader {
            Some((leader, _)) if leader == me => liveness.heartbeat(broker.0 .0, broker.1),
            Some((leader, address)) => {
                if peer.as_ref().is_none_or(|(to, _)| *to != leader) {
                    peer = Some((leader, Peer::new(address)));
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
