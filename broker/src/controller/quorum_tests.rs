//! Three or five controller threads on loopback ports, talking the controller protocol over TCP:
//! a leader is elected, a proposal sent to any node commits on all, the quorum survives the
//! loss of one voter of three and two of five (not three), and a restarted voter catches up.

use super::quorum::{self, ControllerHandle, QuorumConfig};
use super::types::{Proposal, Refused};
use crate::metadata::MetadataRecord;
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address")
}

struct Cluster {
    base: PathBuf,
    voters: BTreeMap<u64, String>,
    nodes: BTreeMap<u64, ControllerHandle>,
}

impl Cluster {
    fn new(name: &str, count: u64) -> Cluster {
        let base =
            std::env::temp_dir().join(format!("strata-quorum-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let voters = (1..=count).map(|id| (id, free_port().to_string())).collect();
        let mut cluster = Cluster { base, voters, nodes: BTreeMap::new() };
        // Together: a voter starts once a majority answers its identity check.
        let started: Vec<(u64, ControllerHandle)> = std::thread::scope(|scope| {
            let starting: Vec<_> = (1..=count)
                .map(|id| {
                    let config = cluster.config(id);
                    scope.spawn(move || (id, quorum::start(config).expect("controller starts")))
                })
                .collect();
            starting.into_iter().map(|t| t.join().expect("start thread")).collect()
        });
        cluster.nodes.extend(started);
        cluster
    }

    fn start(&mut self, id: u64) {
        let config = self.config(id);
        self.nodes.insert(id, quorum::start(config).expect("controller starts"));
    }

    fn config(&self, id: u64) -> QuorumConfig {
        QuorumConfig {
            node_id: id,
            voters: self.voters.clone(),
            listen: self.voters[&id].parse().expect("address"),
            dir: self.base.join(format!("node-{id}")),
            broker: None,
            heartbeat_interval: Duration::from_secs(2),
            session_timeout: Duration::from_secs(9),
            rebalance_interval: None,
            identity: super::quorum::Identity { cluster_id: None, directory_id: format!("d{id}") },
        }
    }

    fn stop(&mut self, id: u64) {
        if let Some(node) = self.nodes.remove(&id) {
            node.stop();
        }
    }

    /// The leader every running node agrees on, within `timeout`.
    fn leader(&self, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let seen: Vec<Option<u64>> = self.nodes.values().map(|n| n.status.leader()).collect();
            if let Some(Some(leader)) = seen.first() {
                if seen.iter().all(|s| *s == Some(*leader)) && self.nodes.contains_key(leader) {
                    return *leader;
                }
            }
            assert!(Instant::now() < deadline, "no agreed leader within {timeout:?}: {seen:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until every running node's image has `topic`.
    fn all_have(&self, topic: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.nodes.values().all(|n| n.images.latest().0.topic(topic).is_some()) {
            assert!(Instant::now() < deadline, "not every node applied {topic}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            self.stop(id);
        }
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn create(name: &str, index: u8, expected_version: Option<u64>) -> Proposal {
    Proposal {
        expected_version,
        records: vec![MetadataRecord::Topic { name: name.into(), topic_id: [index; 16] }],
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures_lite::future::block_on(future)
}

#[test]
fn three_voters_elect_commit_everywhere_survive_one_loss_and_a_restart_catches_up() {
    let mut cluster = Cluster::new("three", 3);
    let leader = cluster.leader(Duration::from_secs(15));
    let follower = *cluster.nodes.keys().find(|id| **id != leader).expect("a follower");

    // Sent to a follower: forwarded to the leader, committed, applied on every node.
    let committed = block_on(cluster.nodes[&follower].propose(create("a", 1, None)))
        .expect("commits through a follower");
    assert_eq!(committed.applied.refused, None);
    cluster.all_have("a", Duration::from_secs(5));

    // A decision made on an old image is refused as stale, on every node alike.
    let stale = block_on(cluster.nodes[&leader].propose(create("b", 2, Some(0))))
        .expect("the entry commits");
    assert!(matches!(stale.applied.refused, Some(Refused::Stale { expected: 0, .. })));

    // The leader goes; the other two elect one of themselves and keep committing.
    cluster.stop(leader);
    let next = cluster.leader(Duration::from_secs(15));
    assert_ne!(next, leader);
    block_on(cluster.nodes[&next].propose(create("c", 3, None)))
        .expect("commits with two of three");
    cluster.all_have("c", Duration::from_secs(5));

    // The old leader comes back from its own directory and catches up.
    cluster.start(leader);
    cluster.all_have("c", Duration::from_secs(15));
    let image = cluster.nodes[&leader].images.latest().0;
    assert!(image.topic("a").is_some() && image.topic("b").is_none());
}

#[test]
fn one_voter_alone_cannot_commit() {
    let mut cluster = Cluster::new("minority", 3);
    let leader = cluster.leader(Duration::from_secs(15));
    let others: Vec<u64> = cluster.nodes.keys().copied().filter(|id| *id != leader).collect();
    for id in others {
        cluster.stop(id);
    }
    let started = Instant::now();
    let outcome = block_on(cluster.nodes[&leader].propose(create("lost", 9, None)));
    assert!(outcome.is_err(), "a minority committed: {outcome:?}");
    assert!(started.elapsed() >= Duration::from_secs(5), "it gave up too early");
    assert!(cluster.nodes[&leader].images.latest().0.topic("lost").is_none());
}

#[test]
fn five_voters_survive_the_loss_of_two_and_not_of_three() {
    let mut cluster = Cluster::new("five", 5);
    let leader = cluster.leader(Duration::from_secs(20));
    // Two go, the leader among them: the other three elect one and commit.
    let other = *cluster.nodes.keys().find(|id| **id != leader).expect("another voter");
    cluster.stop(leader);
    cluster.stop(other);
    let next = cluster.leader(Duration::from_secs(20));
    assert!(next != leader && next != other);
    let survivor = *cluster.nodes.keys().find(|id| **id != next).expect("a follower");
    block_on(cluster.nodes[&survivor].propose(create("three-of-five", 1, None)))
        .expect("commits with three of five");
    cluster.all_have("three-of-five", Duration::from_secs(5));

    // A third goes: two of five are no majority, nothing commits.
    cluster.stop(survivor);
    let outcome = block_on(cluster.nodes[&next].propose(create("two-of-five", 2, None)));
    assert!(outcome.is_err(), "two of five committed: {outcome:?}");
    assert!(cluster.nodes.values().all(|n| n.images.latest().0.topic("two-of-five").is_none()));
}
