//! The classic consumer-group protocol as a state machine with no I/O and no clock of its own:
//! every operation takes `now`, and the coordinator (`coordinator`) does the waiting, the
//! storing and the waking. So every transition can be driven step by step by a seeded test.
//!
//! States as Kafka's GroupCoordinator: Empty → PreparingRebalance (members (re)join; the first
//! rebalance of an empty group waits `group.initial.rebalance.delay.ms`) → CompletingRebalance
//! (the generation is formed; the leader computes assignments) → Stable (SyncGroup delivered
//! them, after the coordinator stored the generation; a late store result of another
//! generation changes nothing). Members are evicted after `session.timeout.ms` without a
//! heartbeat (an OffsetCommit counts as one); a member that does not rejoin within the
//! rebalance timeout is dropped from the new generation. Member ids handed out with
//! MEMBER_ID_REQUIRED (KIP-394) expire after the session timeout of the request that got them.
//! A JoinGroup is judged before it touches the group (validate, then apply): a rejected one
//! changes nothing.
//! Join answers: each member's answer is recorded when its generation forms and stays until
//! the next generation forms or the member joins again, so a waiter that polls after another
//! rebalance began still gets the answer Kafka sent, and never one older than its own join.
//! Assignors run in the clients: the broker relays the leader's assignments byte for byte, so
//! range, round-robin and cooperative-sticky all work. Static members (KIP-345,
//! `group.instance.id`) that rejoin a Stable group with unchanged protocols keep their place
//! under a new member id without a rebalance, adopting the timeouts they send (a rejoining
//! leader is answered its old id as leader, so it syncs as a follower); in any other state, or
//! with changed protocols, their rejoin rebalances. An old incarnation is answered
//! FENCED_INSTANCE_ID (JoinGroup included). Not yet: KIP-848, KIP-814 (skipAssignment).
//! References: Kafka `GroupCoordinator` / `GroupMetadata` (classic protocol), KIP-345, KIP-394.

use crate::error::GroupError;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Kafka's `group.initial.rebalance.delay.ms` default (the broker key overrides it).
pub const INITIAL_REBALANCE_DELAY_MS_DEFAULT: u64 = 3000;
/// Kafka's `group.max.size` is unlimited by default; strata bounds it.
pub const GROUP_MEMBERS_MAX: usize = 1000;
/// Largest protocol metadata or assignment accepted from a member.
pub const MEMBER_METADATA_BYTES_MAX: usize = 1 << 20;
/// Kafka's bounds on session timeouts (`group.min/max.session.timeout.ms`).
pub const SESSION_TIMEOUT_MS_MIN: i32 = 1000;
pub const SESSION_TIMEOUT_MS_MAX: i32 = 1_800_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
    /// A member as its JoinGroup describes it (the rebalance timeout is at least the session).
    fn from_request(member_id: &str, request: &JoinRequest, now: Instant) -> Member {
        let mut member = Member {
            id: String::new(),
            instance_id: request.instance_id.clone(),
            client_id: String::new(),
            client_host: String::new(),
            session_timeout_ms: 0,
            rebalance_timeout_ms: 0,
            protocol_type: request.protocol_type.clone(),
            protocols: Vec::new(),
            assignment: Bytes::new(),
            last_seen: now,
            joined: true,
        };
        member.adopt(member_id, request, now);
        member
    }

    /// Takes what a rejoin sent: its id, client, timeouts and protocols (Kafka's
    /// `updateMember`); the assignment stays.
    fn adopt(&mut self, member_id: &str, request: &JoinRequest, now: Instant) {
        self.id = member_id.to_string();
        self.client_id = request.client_id.clone();
        self.client_host = request.client_host.clone();
        self.session_timeout_ms = request.session_timeout_ms;
        self.rebalance_timeout_ms = request.rebalance_timeout_ms.max(request.session_timeout_ms);
        self.protocols = request.protocols.clone();
        self.last_seen = now;
    }

    /// This member's metadata for `protocol` (empty when it does not support it).
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, md)| md.clone())
            .unwrap_or_default()
    }
}

/// A JoinGroup as the coordinator sees it.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// The JoinGroup version (v4+ gets MEMBER_ID_REQUIRED first, KIP-394).
    pub version: i16,
}

/// A member's place in a formed generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub generation: i32,
    pub protocol_type: String,
    pub protocol: String,
    pub leader: String,
    /// Only for the leader: every member with its metadata for the chosen protocol.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

/// What a JoinGroup is answered: the member's id (also on errors, for MEMBER_ID_REQUIRED) and
/// its place or the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinOutcome {
    pub member_id: String,
    pub result: Result<Joined, GroupError>,
}

impl JoinOutcome {
    fn failed(member_id: String, error: GroupError) -> Self {
        JoinOutcome { member_id, result: Err(error) }
    }
}

/// The first step of a join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinStep {
    /// Answer now.
    Done(JoinOutcome),
    /// The member is in; its answer comes when the generation forms (`join_outcome`).
    Wait { member_id: String },
}

/// What a SyncGroup gets: its assignment with the group's protocol type and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub assignment: Bytes,
    pub protocol_type: String,
    pub protocol: String,
}

/// The first step of a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncStep {
    /// The leader handed in the assignments: store the generation, then `stored`.
    Store,
    /// Wait until the group is Stable (`sync_outcome`).
    Wait,
}

/// How a JoinGroup is taken, decided before the group is touched.
#[derive(Debug, Clone, PartialEq, Eq)]
enum JoinPlan {
    /// A member (or a pending member id) joins again under its id.
    Rejoin(String),
    /// A static member restarted: `previous` is the member id its instance id held.
    StaticRestart { previous: String },
    /// A new member, let in under a fresh id.
    New,
    /// A new dynamic member of v4+ gets a fresh id to come back with (KIP-394).
    MemberIdRequired,
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
    /// When the rebalance in progress began (for the rebalance-duration metric).
    rebalance_started: Option<Instant>,
    /// Each member's answer from the generation that formed last; a member's own (re)join
    /// drops it, so a waiter never gets an answer older than its join, while one that polls
    /// after a new rebalance began still gets the answer of the generation it joined.
    pub join_outcomes: BTreeMap<String, Joined>,
    /// Changed since its metadata record was last written (see `stored`).
    pub dirty: bool,
    /// The metadata record value last written for this group (rewritten by compaction).
    pub stored_value: Option<Bytes>,
    /// When each of `pending_ids` expires (the session timeout of the request that got it).
    pending_deadlines: BTreeMap<String, Instant>,
    next_member: u64,
    /// Makes member ids unique across coordinator restarts.
    id_salt: u64,
}

/// The protocol type of Kafka consumers' groups (their member metadata is a
/// ConsumerProtocolSubscription).
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

impl Group {
    /// The topics the members are subscribed to, from their metadata for the chosen protocol
    /// (Kafka's `ClassicGroup.computeSubscribedTopics`); `None` when it cannot be known: not a
    /// consumer group, no protocol chosen yet, or a subscription that does not parse.
    pub fn subscribed_topics(&self) -> Option<std::collections::BTreeSet<String>> {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE || self.protocol.is_empty() {
            return None;
        }
        let mut topics = std::collections::BTreeSet::new();
        for member in self.members.values() {
            let (_, metadata) = member.protocols.iter().find(|(name, _)| *name == self.protocol)?;
            // A version, then the subscription read as v0 (every later version extends it).
            let mut buf = metadata.clone();
            if buf.len() < 2 {
                return None;
            }
            let _version = bytes::Buf::get_i16(&mut buf);
            let subscription = ConsumerProtocolSubscription::decode(&mut buf, 0).ok()?;
            topics.extend(subscription.topics.iter().map(|topic| topic.to_string()));
        }
        Some(topics)
    }

    pub fn empty() -> Self {
        Self::with_salt(rand::random())
    }

    /// An empty group whose member ids derive from `salt` (reproducible in tests).
    pub fn with_salt(salt: u64) -> Self {
        Group {
            state: State::Empty,
            generation: 0,
            protocol_type: String::new(),
            protocol: String::new(),
            leader: String::new(),
            members: BTreeMap::new(),
            pending_ids: Vec::new(),
            rebalance_deadline: None,
            rebalance_started: None,
            join_outcomes: BTreeMap::new(),
            dirty: false,
            stored_value: None,
            pending_deadlines: BTreeMap::new(),
            next_member: 0,
            id_salt: salt,
        }
    }

    pub fn new_member_id(&mut self, client_id: &str) -> String {
        self.next_member += 1;
        let mixed = self.id_salt ^ self.next_member.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        format!("{client_id}-{}-{mixed:016x}", self.next_member)
    }

    /// The member id that holds static instance id `instance`.
    fn holder_of(&self, instance: &str) -> Option<&str> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance))
            .map(|m| m.id.as_str())
    }

    /// FENCED_INSTANCE_ID when `instance` now belongs to another member id (an old incarnation
    /// of a static member still talking).
    fn fenced(&self, member_id: &str, instance: Option<&str>) -> bool {
        instance.and_then(|instance| self.holder_of(instance)).is_some_and(|id| id != member_id)
    }

    /// A JoinGroup's first step (the request already passed `check_join_request`): judged
    /// against the group as it is, then applied.
    pub fn join(&mut self, request: &JoinRequest, now: Instant, initial_delay_ms: u64) -> JoinStep {
        let plan = match self.plan_join(request) {
            Ok(plan) => plan,
            Err(error) => {
                return JoinStep::Done(JoinOutcome::failed(request.member_id.clone(), error))
            }
        };
        match plan {
            JoinPlan::Rejoin(member_id) => self.admit(member_id, request, now, initial_delay_ms),
            JoinPlan::StaticRestart { previous } => {
                self.restart_static(&previous, request, now, initial_delay_ms)
            }
            JoinPlan::New => {
                let member_id = self.new_member_id(&request.client_id);
                self.admit(member_id, request, now, initial_delay_ms)
            }
            JoinPlan::MemberIdRequired => {
                let member_id = self.new_member_id(&request.client_id);
                let session = Duration::from_millis(request.session_timeout_ms.max(0) as u64);
                self.add_pending(member_id.clone(), now + session);
                JoinStep::Done(JoinOutcome::failed(member_id, GroupError::MemberIdRequired))
            }
        }
    }

    /// Kafka's checks of a JoinGroup, in strata's order, without touching the group. Protocol
    /// compatibility is judged against the members as they are (Kafka's `supportsProtocols`),
    /// so a static member's old incarnation counts until it is replaced.
    fn plan_join(&self, request: &JoinRequest) -> Result<JoinPlan, GroupError> {
        let member_id = request.member_id.as_str();
        let instance = request.instance_id.as_deref();
        let compatible = || {
            compatible(self, &request.protocol_type, &request.protocols)
                .then_some(())
                .ok_or(GroupError::InconsistentGroupProtocol)
        };
        if !member_id.is_empty() {
            if self.fenced(member_id, instance) {
                return Err(GroupError::FencedInstanceId);
            }
            if !self.members.contains_key(member_id)
                && !self.pending_ids.iter().any(|p| p == member_id)
            {
                return Err(GroupError::UnknownMemberId);
            }
            compatible()?;
            return Ok(JoinPlan::Rejoin(member_id.to_string()));
        }
        if let Some(previous) = instance.and_then(|instance| self.holder_of(instance)) {
            compatible()?;
            return Ok(JoinPlan::StaticRestart { previous: previous.to_string() });
        }
        if self.members.len() + self.pending_ids.len() >= GROUP_MEMBERS_MAX {
            return Err(GroupError::GroupMaxSizeReached);
        }
        if instance.is_none() && request.version >= 4 {
            return Ok(JoinPlan::MemberIdRequired);
        }
        compatible()?;
        Ok(JoinPlan::New)
    }

    /// Lets `member_id` into the rebalance (starting one if none runs) with what it sent; its
    /// answer comes when the generation forms.
    fn admit(
        &mut self,
        member_id: String,
        request: &JoinRequest,
        now: Instant,
        initial_delay_ms: u64,
    ) -> JoinStep {
        self.remove_pending(&member_id);
        if self.members.is_empty() {
            self.protocol_type = request.protocol_type.clone();
        }
        // An answer from an earlier generation is not this join's.
        self.join_outcomes.remove(&member_id);
        self.members.insert(member_id.clone(), Member::from_request(&member_id, request, now));
        self.prepare_rebalance(now, initial_delay_ms);
        if let Some(member) = self.members.get_mut(&member_id) {
            member.joined = true;
        }
        self.try_complete_join(now);
        JoinStep::Wait { member_id }
    }

    /// A static member's restart (KIP-345): it moves from `previous` to a fresh member id. In a
    /// Stable group with unchanged protocols it keeps its place and assignment at once; anywhere
    /// else it rebalances (in CompletingRebalance the leader may already be assigning to
    /// `previous`: Kafka's `updateStaticMemberAndRebalance`).
    fn restart_static(
        &mut self,
        previous: &str,
        request: &JoinRequest,
        now: Instant,
        initial_delay_ms: u64,
    ) -> JoinStep {
        let fresh = self.new_member_id(&request.client_id);
        let Some(mut member) = self.members.remove(previous) else {
            unreachable!("plan_join found {previous} holding the instance id");
        };
        let leader_before = self.leader.clone();
        if self.leader == previous {
            self.leader = fresh.clone();
        }
        self.dirty = true;
        if self.state != State::Stable || member.protocols != request.protocols {
            return self.admit(fresh, request, now, initial_delay_ms);
        }
        member.adopt(&fresh, request, now);
        self.members.insert(fresh.clone(), member);
        // The leader is answered under its old id, so it syncs as a follower instead of
        // assigning with no member list (Kafka before KIP-814).
        let joined = Joined {
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: leader_before,
            members: Vec::new(),
        };
        JoinStep::Done(JoinOutcome { member_id: fresh, result: Ok(joined) })
    }

    fn add_pending(&mut self, member_id: String, deadline: Instant) {
        self.pending_deadlines.insert(member_id.clone(), deadline);
        self.pending_ids.push(member_id);
    }

    /// Forgets a pending member id; whether it was pending.
    fn remove_pending(&mut self, member_id: &str) -> bool {
        self.pending_deadlines.remove(member_id);
        let before = self.pending_ids.len();
        self.pending_ids.retain(|pending| pending != member_id);
        self.pending_ids.len() < before
    }

    /// Drops pending member ids whose session ran out before they joined.
    fn expire_pending(&mut self, now: Instant) {
        assert_eq!(self.pending_ids.len(), self.pending_deadlines.len(), "a pending id's deadline");
        self.pending_deadlines.retain(|_, deadline| now < *deadline);
        let deadlines = &self.pending_deadlines;
        self.pending_ids.retain(|id| deadlines.contains_key(id));
    }

    /// A waiting join's answer, once the generation it joined has formed (in any state: a
    /// rebalance that began since does not take back what Kafka already sent).
    pub fn join_outcome(&self, member_id: &str) -> Option<JoinOutcome> {
        if let Some(joined) = self.join_outcomes.get(member_id) {
            return Some(JoinOutcome {
                member_id: member_id.to_string(),
                result: Ok(joined.clone()),
            });
        }
        if !self.members.contains_key(member_id) {
            return Some(JoinOutcome::failed(member_id.to_string(), GroupError::UnknownMemberId));
        }
        None
    }

    /// A SyncGroup's first step: the member's checks, and the leader's assignments.
    pub fn sync(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> Result<SyncStep, GroupError> {
        if self.fenced(member_id, instance) {
            return Err(GroupError::FencedInstanceId);
        }
        let Some(member) = self.members.get_mut(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if self.state == State::PreparingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        member.last_seen = now;
        if self.state != State::CompletingRebalance || self.leader != member_id {
            return Ok(SyncStep::Wait);
        }
        for (id, assignment) in assignments {
            if assignment.len() > MEMBER_METADATA_BYTES_MAX {
                continue;
            }
            if let Some(member) = self.members.get_mut(&id) {
                member.assignment = assignment;
            }
        }
        Ok(SyncStep::Store)
    }

    /// After the leader's sync stored (or failed to store) `generation`: Stable, or a new
    /// rebalance when it could not be stored (nobody gets an assignment that a restart forgets).
    /// Only the generation still completing is decided: a late result for an older one, or a
    /// second one for a generation already Stable, changes nothing.
    /// Returns how long the rebalance took (from the first member's join that started it)
    /// when the group became Stable.
    pub fn stored(&mut self, generation: i32, stored: bool, now: Instant) -> Option<Duration> {
        if self.state != State::CompletingRebalance || self.generation != generation {
            return None;
        }
        if stored {
            self.state = State::Stable;
            return self.rebalance_started.take().map(|at| now.saturating_duration_since(at));
        }
        self.prepare_rebalance(now, 0);
        None
    }

    /// A waiting sync's answer, once the group is Stable (or its generation is gone).
    pub fn sync_outcome(
        &self,
        member_id: &str,
        generation: i32,
    ) -> Option<Result<Assignment, GroupError>> {
        let Some(member) = self.members.get(member_id) else {
            return Some(Err(GroupError::UnknownMemberId));
        };
        if self.generation != generation || self.state == State::PreparingRebalance {
            return Some(Err(GroupError::RebalanceInProgress));
        }
        (self.state == State::Stable).then(|| {
            Ok(Assignment {
                assignment: member.assignment.clone(),
                protocol_type: self.protocol_type.clone(),
                protocol: self.protocol.clone(),
            })
        })
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        if self.fenced(member_id, instance) {
            return Err(GroupError::FencedInstanceId);
        }
        let (current_generation, state) = (self.generation, self.state);
        let Some(member) = self.members.get_mut(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if generation != current_generation {
            return Err(GroupError::IllegalGeneration);
        }
        member.last_seen = now;
        if state == State::PreparingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Removes members by id; an answer per member id. The rest rebalance.
    pub fn leave(&mut self, member_ids: &[String], now: Instant) -> Vec<Result<(), GroupError>> {
        let identities: Vec<(String, Option<String>)> =
            member_ids.iter().map(|id| (id.clone(), None)).collect();
        self.leave_members(&identities, now)
    }

    /// Removes members named by (member id, group instance id), as LeaveGroup v3+ does (KIP-345):
    /// a static member may be named by its instance id alone (an administrator removing it);
    /// an instance id held by another member id is FENCED_INSTANCE_ID.
    pub fn leave_members(
        &mut self,
        members: &[(String, Option<String>)],
        now: Instant,
    ) -> Vec<Result<(), GroupError>> {
        let before = self.members.len();
        let answers: Vec<Result<(), GroupError>> = members
            .iter()
            .map(|(id, instance)| self.remove_member(id, instance.as_deref()))
            .collect();
        if self.members.len() < before {
            self.prepare_rebalance(now, 0);
            self.try_complete_join(now);
        }
        answers
    }

    fn remove_member(&mut self, member_id: &str, instance: Option<&str>) -> Result<(), GroupError> {
        let id = match instance {
            Some(instance) => {
                let holder = self.holder_of(instance).ok_or(GroupError::UnknownMemberId)?;
                if !member_id.is_empty() && member_id != holder {
                    return Err(GroupError::FencedInstanceId);
                }
                holder.to_string()
            }
            None => member_id.to_string(),
        };
        if self.members.remove(&id).is_some() {
            return Ok(());
        }
        // A member id handed out with MEMBER_ID_REQUIRED that never joined leaves too.
        if self.remove_pending(&id) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId)
        }
    }

    /// Kafka's rules for an OffsetCommit against the group (classic protocol,
    /// `GroupCoordinator.doCommitOffsets`): a member of the current generation commits in
    /// Stable and PreparingRebalance (a consumer commits before it rejoins), and its commit
    /// counts as a heartbeat; in CompletingRebalance it has no assignment yet and gets
    /// REBALANCE_IN_PROGRESS.
    pub fn check_commit(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        if self.fenced(member_id, instance) {
            return Err(GroupError::FencedInstanceId);
        }
        if member_id.is_empty() && generation == -1 && instance.is_none() {
            // A standalone commit: allowed while the group has no members.
            return if self.members.is_empty() { Ok(()) } else { Err(GroupError::UnknownMemberId) };
        }
        let (current_generation, state) = (self.generation, self.state);
        let Some(member) = self.members.get_mut(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if generation != current_generation {
            return Err(GroupError::IllegalGeneration);
        }
        if state == State::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        member.last_seen = now;
        Ok(())
    }

    /// The timer: expires pending member ids and sessions (a rebalance follows) and completes
    /// a join whose deadline passed. Returns whether the members or the generation changed
    /// (what waiters care about; a pending id expiring wakes nobody).
    pub fn tick(&mut self, now: Instant) -> bool {
        self.expire_pending(now);
        let mut changed = false;
        if self.expire_members(now) {
            changed = true;
            if self.state != State::PreparingRebalance {
                self.prepare_rebalance(now, 0);
            }
        }
        changed | self.try_complete_join(now)
    }

    /// Starts (or continues) a rebalance: everyone must (re)join by the deadline.
    fn prepare_rebalance(&mut self, now: Instant, initial_delay_ms: u64) {
        if self.state == State::PreparingRebalance {
            return;
        }
        let wait_ms = if self.state == State::Empty {
            initial_delay_ms
        } else {
            self.members.values().map(|m| m.rebalance_timeout_ms.max(0) as u64).max().unwrap_or(0)
        };
        self.rebalance_deadline = Some(now + Duration::from_millis(wait_ms));
        self.rebalance_started.get_or_insert(now);
        self.state = State::PreparingRebalance;
        // The answers of the generation that formed last stay for waiters that have not
        // polled yet; a member that rejoins drops its own (`admit`).
        for member in self.members.values_mut() {
            member.joined = false;
        }
    }

    /// Completes the join phase if everyone rejoined (the first generation of a group waits
    /// for its deadline, the initial rebalance delay) or the deadline passed: forms the next
    /// generation, chooses the protocol and leader, and records each member's join answer.
    fn try_complete_join(&mut self, now: Instant) -> bool {
        if self.state != State::PreparingRebalance {
            return false;
        }
        let everyone = self.members.values().all(|m| m.joined);
        let deadline_passed = self.rebalance_deadline.is_some_and(|d| now >= d);
        let first_join = self.generation == 0 || self.leader.is_empty();
        if !(deadline_passed || (everyone && !first_join)) {
            return false;
        }
        self.members.retain(|_, m| m.joined);
        self.rebalance_deadline = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = State::Empty;
            self.rebalance_started = None;
            self.leader.clear();
            self.join_outcomes.clear();
            self.dirty = true;
            return true;
        }
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
                let joined = Joined {
                    generation: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol: self.protocol.clone(),
                    leader: self.leader.clone(),
                    members: if *id == self.leader { everyone.clone() } else { Vec::new() },
                };
                (id.clone(), joined)
            })
            .collect();
        self.state = State::CompletingRebalance;
        true
    }

    /// Drops members whose session expired; returns whether any was dropped.
    fn expire_members(&mut self, now: Instant) -> bool {
        let before = self.members.len();
        let state = self.state;
        self.members.retain(|_, m| {
            // A member waiting in a join is alive while the rebalance runs.
            (state == State::PreparingRebalance && m.joined)
                || now.saturating_duration_since(m.last_seen)
                    < Duration::from_millis(m.session_timeout_ms.max(0) as u64)
        });
        self.members.len() != before
    }
}

/// Checks a JoinGroup that no group state can make valid.
pub fn check_join_request(request: &JoinRequest) -> Result<(), GroupError> {
    if !super::valid_group_id(&request.group) {
        return Err(GroupError::InvalidGroupId);
    }
    if !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&request.session_timeout_ms) {
        return Err(GroupError::InvalidSessionTimeout);
    }
    // Kafka's `supportsProtocols`: no group takes an empty protocol type or protocol list.
    if request.protocol_type.is_empty()
        || request.protocols.is_empty()
        || request.protocols.iter().any(|(_, md)| md.len() > MEMBER_METADATA_BYTES_MAX)
    {
        return Err(GroupError::InconsistentGroupProtocol);
    }
    Ok(())
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
fn compatible(group: &Group, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
    if group.members.is_empty() {
        return true;
    }
    group.protocol_type == protocol_type
        && protocols.iter().any(|(name, _)| {
            group.members.values().all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
}
