//! The classic consumer-group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), run by
//! the shard that coordinates the group (see `group`).
//!
//! States as Kafka's GroupCoordinator: Empty → PreparingRebalance (members (re)join; the first
//! rebalance of an empty group waits `group.initial.rebalance.delay.ms`) → CompletingRebalance
//! (the generation is formed; the leader computes assignments) → Stable (SyncGroup delivered
//! them). Members are evicted after `session.timeout.ms` without a heartbeat; a member that does
//! not rejoin within the rebalance timeout is dropped from the new generation.
//! Assignors run in the clients: the broker relays the leader's assignments byte for byte, so
//! range, round-robin and cooperative-sticky all work. Static members (KIP-345,
//! `group.instance.id`) that rejoin within their session keep their place without a
//! rebalance; an old incarnation is answered FENCED_INSTANCE_ID. Not yet: KIP-848.

use crate::error::code;
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Kafka's `group.initial.rebalance.delay.ms` default (the broker flag overrides it).
pub const INITIAL_REBALANCE_DELAY_MS_DEFAULT: u64 = 3000;
/// Kafka's `group.max.size` is unlimited by default; strata bounds it.
pub const GROUP_MEMBERS_MAX: usize = 1000;
/// Largest protocol metadata or assignment accepted from a member.
pub const MEMBER_METADATA_BYTES_MAX: usize = 1 << 20;
/// Kafka's bounds on session timeouts (`group.min/max.session.timeout.ms`).
pub const SESSION_TIMEOUT_MS_MIN: i32 = 1000;
pub const SESSION_TIMEOUT_MS_MAX: i32 = 1_800_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub last_seen: Instant,
    /// Joined (or rejoined) for the generation being formed.
    pub joined: bool,
}

impl Member {
    /// This member's metadata for `protocol` (empty when it does not support it).
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, md)| md.clone())
            .unwrap_or_default()
    }
}

/// What a completed join tells a member.
#[derive(Debug, Clone)]
pub struct JoinOutcome {
    pub error_code: i16,
    pub generation: i32,
    pub protocol_type: String,
    pub protocol: String,
    pub leader: String,
    pub member_id: String,
    /// Only for the leader: every member with its metadata for the chosen protocol.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

#[derive(Debug)]
pub struct Group {
    pub state: State,
    pub generation: i32,
    pub protocol_type: String,
    pub protocol: String,
    pub leader: String,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED and not yet used.
    pub pending_ids: Vec<String>,
    pub rebalance_deadline: Option<Instant>,
    pub join_outcomes: BTreeMap<String, JoinOutcome>,
    /// Changed since its metadata record was last written (see `group::stored`).
    pub dirty: bool,
    /// The metadata record value last written for this group (rewritten by compaction).
    pub stored_value: Option<Bytes>,
    next_member: u64,
}

/// A group and the event its waiters (JoinGroup, SyncGroup) listen on.
pub struct GroupCell {
    pub group: RefCell<Group>,
    pub changed: event_listener::Event,
}

impl GroupCell {
    pub fn new() -> Rc<Self> {
        Self::with(Group::empty())
    }

    pub fn with(group: Group) -> Rc<Self> {
        Rc::new(GroupCell { group: RefCell::new(group), changed: event_listener::Event::new() })
    }
}

impl Group {
    pub fn empty() -> Self {
        Group {
            state: State::Empty,
            generation: 0,
            protocol_type: String::new(),
            protocol: String::new(),
            leader: String::new(),
            members: BTreeMap::new(),
            pending_ids: Vec::new(),
            rebalance_deadline: None,
            join_outcomes: BTreeMap::new(),
            dirty: false,
            stored_value: None,
            next_member: 0,
        }
    }

    pub fn new_member_id(&mut self, client_id: &str) -> String {
        self.next_member += 1;
        format!("{client_id}-{}-{:016x}", self.next_member, rand::random::<u64>())
    }

    /// Starts (or continues) a rebalance: everyone must (re)join by the deadline.
    pub fn prepare_rebalance(&mut self, initial_delay_ms: u64) {
        let now = Instant::now();
        if self.state != State::PreparingRebalance {
            let wait_ms = if self.state == State::Empty {
                initial_delay_ms
            } else {
                self.members
                    .values()
                    .map(|m| m.rebalance_timeout_ms.max(0) as u64)
                    .max()
                    .unwrap_or(0)
            };
            self.rebalance_deadline = Some(now + Duration::from_millis(wait_ms));
            self.state = State::PreparingRebalance;
            for member in self.members.values_mut() {
                member.joined = false;
            }
            self.join_outcomes.clear();
        }
    }

    /// Completes the join phase if everyone rejoined (or the deadline passed): forms the next
    /// generation, chooses the protocol and leader, and records each member's join answer.
    pub fn try_complete_join(&mut self, now: Instant, initial_delay_passed: bool) -> bool {
        if self.state != State::PreparingRebalance {
            return false;
        }
        let everyone = self.members.values().all(|m| m.joined);
        let deadline_passed = self.rebalance_deadline.is_some_and(|d| now >= d);
        let first_join = self.generation == 0 || self.leader.is_empty();
        if !(deadline_passed || (everyone && (!first_join || initial_delay_passed))) {
            return false;
        }
        self.members.retain(|_, m| m.joined);
        self.rebalance_deadline = None;
        if self.members.is_empty() {
            self.state = State::Empty;
            self.generation += 1;
            self.leader.clear();
            self.dirty = true;
            return true;
        }
        self.generation += 1;
        self.protocol = choose_protocol(&self.members);
        if !self.members.contains_key(&self.leader) {
            self.leader = self.members.keys().next().cloned().unwrap_or_default();
        }
        let everyone: Vec<(String, Option<String>, Bytes)> = self
            .members
            .values()
            .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata_for(&self.protocol)))
            .collect();
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
            member.last_seen = now;
        }
        self.join_outcomes = self
            .members
            .keys()
            .map(|id| {
                let outcome = JoinOutcome {
                    error_code: code::NONE,
                    generation: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol: self.protocol.clone(),
                    leader: self.leader.clone(),
                    member_id: id.clone(),
                    members: if *id == self.leader { everyone.clone() } else { Vec::new() },
                };
                (id.clone(), outcome)
            })
            .collect();
        self.state = State::CompletingRebalance;
        true
    }

    /// Drops members whose session expired; returns whether any was dropped.
    pub fn expire_members(&mut self, now: Instant) -> bool {
        let before = self.members.len();
        let state = self.state;
        self.members.retain(|_, m| {
            // A member waiting in a join is alive while the rebalance runs.
            (state == State::PreparingRebalance && m.joined)
                || now.duration_since(m.last_seen)
                    < Duration::from_millis(m.session_timeout_ms.max(0) as u64)
        });
        self.members.len() != before
    }
}

/// The protocol every member supports that wins a vote of each member's most preferred one
/// (Kafka's `selectProtocol`).
fn choose_protocol(members: &BTreeMap<String, Member>) -> String {
    let candidates: Vec<String> = members
        .values()
        .next()
        .map(|first| {
            first
                .protocols
                .iter()
                .map(|(name, _)| name.clone())
                .filter(|name| members.values().all(|m| m.protocols.iter().any(|(n, _)| n == name)))
                .collect()
        })
        .unwrap_or_default();
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for member in members.values() {
        if let Some((name, _)) = member.protocols.iter().find(|(name, _)| candidates.contains(name))
        {
            *votes.entry(name.as_str()).or_default() += 1;
        }
    }
    candidates
        .iter()
        .max_by_key(|name| {
            (
                votes.get(name.as_str()).copied().unwrap_or(0),
                std::cmp::Reverse(candidates.iter().position(|c| c == *name)),
            )
        })
        .cloned()
        .unwrap_or_default()
}

/// Whether every member supports at least one protocol in common with `protocols`.
pub fn compatible(group: &Group, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
    if group.members.is_empty() {
        return true;
    }
    group.protocol_type == protocol_type
        && protocols.iter().any(|(name, _)| {
            group.members.values().all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
}
