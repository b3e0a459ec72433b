//! Seeded model tests of the KIP-848 consumer group coordinator's state machine
//! (`broker::services::groups::consumer`), with no I/O: simulated clients behave as librdkafka
//! and the Java consumer do, and a virtual clock drives sessions and rebalance timeouts.
//!
//! Each seed runs a random workload: dynamic and static members join, heartbeat (sometimes with
//! their full state), lose answers (the coordinator committed the step, the client never saw
//! it, and retries with its old epoch), revoke partitions after random delays, change their
//! subscriptions (names and regexes), leave (-1), leave for now as static members (-2) and
//! come back under a new member id, crash (stop heartbeating) and restart; topics are created,
//! deleted and grown; the clock jumps past session and rebalance timeouts. Every step's records
//! go through their Kafka encoding and back before they are applied, as a restart replays them.
//! After every step the test checks KIP-848's rules:
//! 1. no partition is in two members' assigned or pending-revocation sets (`apply` reports it);
//! 2. the partitions each live client believes it owns are pairwise disjoint (a client whose
//!    session passed without a heartbeat answered owns nothing, as a real client drops them);
//! 3. member epochs and the assignment epoch never exceed the group epoch;
//! 4. replaying every record from an empty group, and replaying the group's compaction
//!    snapshot, both rebuild the same group.
//!
//! At the end the workload quiesces (no more changes, every live client heartbeats and revokes
//! promptly) and the group must converge: every member Stable at the group epoch, every
//! partition of a subscribed topic assigned exactly once, to a subscriber, and with the uniform
//! assignor and one subscription sizes differ by at most one. A static member that restarts
//! within its session after a -2 leave gets its partitions back without a group epoch bump.
//! A failure names its seed: `SEED=<n> cargo test -p broker --test consumer_group_state_machine`
//! replays it; `SEEDS=<count>` runs more seeds.
//! References: KIP-848; Kafka `GroupMetadataManager`, `CurrentAssignmentBuilder`.

mod seeds;

use broker::error::GroupError;
use broker::services::groups::assignors::Assignor;
use broker::services::groups::consumer::records::{decode, encode};
use broker::services::groups::consumer::{
    fence, heartbeat, ConsumerConfig, ConsumerGroup, HeartbeatRequest, MemberState, Partitions,
    Record, TopicId, TopicMap,
};
use std::collections::{BTreeMap, BTreeSet};

const SEEDS_DEFAULT: u64 = 150;
const STEPS_PER_SEED: usize = 400;
const CLIENTS_MAX: usize = 6;
const SESSION_MS: i64 = 45_000;
const REBALANCE_MS: i32 = 30_000;
const GROUP: &str = "model-group";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A simulated consumer.
#[derive(Debug, Clone)]
struct Client {
    member_id: String,
    instance_id: Option<String>,
    /// The epoch the client knows (0: (re)joining).
    epoch: i32,
    /// Partitions it believes it owns (consumes).
    owned: Partitions,
    /// Its last assignment from the coordinator.
    assignment: Partitions,
    names: Vec<String>,
    regex: Option<String>,
    /// Running (heartbeating).
    alive: bool,
    /// Virtual ms of its last answered heartbeat.
    last_ok_ms: i64,
    /// A static member that left with -2 and will restart.
    static_left: bool,
    incarnation: u32,
    /// Since when it may have been asked to revoke without having done so: an answer that
    /// took partitions away, or a heartbeat whose answer never came.
    unsettled_since_ms: Option<i64>,
    /// Revoked partitions it has not reported yet.
    revoked: bool,
    /// Its last heartbeat got no answer: the next one sends everything again (as the Java
    /// consumer and librdkafka do after a failed heartbeat), so it learns its assignment.
    resend_full: bool,
}

impl Client {
    /// It counts its partitions lost once its session passed without an answer, or once its
    /// rebalance timeout passed while it may owe a revocation (the Java consumer leaves when
    /// `max.poll.interval.ms` passes; the coordinator fences it then).
    fn owns_at(&self, now_ms: i64) -> bool {
        self.alive
            && now_ms - self.last_ok_ms < SESSION_MS
            && self.unsettled_since_ms.is_none_or(|since| now_ms - since < i64::from(REBALANCE_MS))
    }

    /// Records whether it still owes a revocation after an answer (or a lost one): it is
    /// settled once an answered heartbeat told the coordinator what it owns and it owes none.
    fn settle(&mut self, now_ms: i64, answered: bool, reported: bool) {
        let owes = !minus(&self.owned, &self.assignment).is_empty();
        if !answered || owes {
            self.unsettled_since_ms.get_or_insert(now_ms);
        } else if reported {
            self.unsettled_since_ms = None;
        }
    }
}

/// The coordinator's timers, as `consumer_coordinator` keeps them (in virtual ms).
#[derive(Default)]
struct Timers {
    session: BTreeMap<String, i64>,
    revocation: BTreeMap<String, (i32, i64)>,
}

struct Sim {
    rng: Rng,
    seed: u64,
    now_ms: i64,
    topics: TopicMap,
    next_topic: u8,
    group: ConsumerGroup,
    log: Vec<Record>,
    clients: Vec<Client>,
    timers: Timers,
    config: ConsumerConfig,
    steps: usize,
}

fn topic_id(n: u8) -> TopicId {
    let mut id = [0u8; 16];
    id[0] = 0xA0;
    id[15] = n;
    id
}

fn count(partitions: &Partitions) -> usize {
    partitions.values().map(BTreeSet::len).sum()
}

fn minus(a: &Partitions, b: &Partitions) -> Partitions {
    let mut out = Partitions::new();
    for (topic, parts) in a {
        let rest: BTreeSet<i32> = parts
            .iter()
            .filter(|p| !b.get(topic).is_some_and(|other| other.contains(p)))
            .copied()
            .collect();
        if !rest.is_empty() {
            out.insert(*topic, rest);
        }
    }
    out
}

fn union(a: &Partitions, b: &Partitions) -> Partitions {
    let mut out = a.clone();
    for (topic, parts) in b {
        out.entry(*topic).or_default().extend(parts.iter().copied());
    }
    out.retain(|_, parts| !parts.is_empty());
    out
}

impl Sim {
    fn new(seed: u64, assignor: Assignor) -> Sim {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut topics = TopicMap::default();
        let topic_count = 1 + rng.below(3) as u8;
        for n in 0..topic_count {
            let partitions = 1 + rng.below(6) as i32;
            topics.topics.insert(format!("topic-{n}"), (topic_id(n), partitions));
        }
        topics.version = 1;
        let config = ConsumerConfig {
            session_timeout_ms: SESSION_MS as i32,
            assignors: vec![assignor],
            ..ConsumerConfig::default()
        };
        Sim {
            rng,
            seed,
            now_ms: 1_000_000,
            topics,
            next_topic: topic_count,
            group: ConsumerGroup::new(GROUP),
            log: Vec::new(),
            clients: Vec::new(),
            timers: Timers::default(),
            config,
            steps: 0,
        }
    }

    fn fail(&self, message: String) -> ! {
        panic!("seed {} step {}: {message}", self.seed, self.steps)
    }

    /// Applies a step's records as the coordinator does, through their encoding.
    fn commit(&mut self, records: &[Record]) {
        for record in records {
            let (key, value) = encode(GROUP, record);
            let Some((group, decoded)) = decode(&key, value.as_deref()) else {
                self.fail(format!("record does not decode: {record:?}"))
            };
            assert_eq!(group, GROUP);
            if let Err(error) = self.group.apply(&decoded) {
                self.fail(format!("rule 1: {error} (record {decoded:?})"));
            }
            self.log.push(decoded);
        }
        self.timers.session.retain(|id, _| self.group.members.contains_key(id));
        self.timers.revocation.retain(|id, _| self.group.members.contains_key(id));
    }

    fn random_names(&mut self) -> Vec<String> {
        let all: Vec<String> = self.topics.topics.keys().cloned().collect();
        let mut names: Vec<String> = all.into_iter().filter(|_| self.rng.chance(60)).collect();
        if names.is_empty() && self.rng.chance(70) {
            names.push(format!("topic-{}", self.rng.below(u64::from(self.next_topic) + 1)));
        }
        names
    }

    fn new_client(&mut self) -> Client {
        let is_static = self.rng.chance(40);
        let n = self.clients.len();
        let names = self.random_names();
        let regex = self.rng.chance(20).then(|| "topic-[02]".to_string());
        Client {
            member_id: format!("member-{n}-0"),
            instance_id: is_static.then(|| format!("instance-{n}")),
            epoch: 0,
            owned: Partitions::new(),
            assignment: Partitions::new(),
            names,
            regex,
            alive: true,
            last_ok_ms: self.now_ms,
            static_left: false,
            incarnation: 0,
            unsettled_since_ms: None,
            revoked: false,
            resend_full: false,
        }
    }

    fn request(&mut self, index: usize, full: bool) -> HeartbeatRequest {
        let client = &self.clients[index];
        let joining = client.epoch == 0;
        let full = full || joining || client.resend_full;
        HeartbeatRequest {
            group_id: GROUP.to_string(),
            member_id: client.member_id.clone(),
            member_epoch: client.epoch,
            instance_id: client.instance_id.clone(),
            rack_id: None,
            rebalance_timeout_ms: if full { REBALANCE_MS } else { -1 },
            subscribed_topic_names: full.then(|| client.names.clone()),
            subscribed_topic_regex: full.then(|| client.regex.clone().unwrap_or_default()),
            server_assignor: None,
            // After a revocation a client reports what it owns at once (librdkafka does).
            owned: if joining {
                Some(Partitions::new())
            } else {
                (full || client.revoked || self.rng.chance(70)).then(|| client.owned.clone())
            },
            client_id: format!("client-{index}"),
            client_host: "/127.0.0.1".to_string(),
            principal: "User:ANONYMOUS".to_string(),
            host: "127.0.0.1".to_string(),
        }
    }

    /// One heartbeat of client `index`; `lose` drops the answer on its way back.
    fn heartbeat(&mut self, index: usize, full: bool, lose: bool) {
        let request = self.request(index, full);
        let existing = self.group.is_live().then_some(&self.group);
        let outcome =
            heartbeat(existing, &request, &self.topics, &self.config, self.now_ms, &|_| true);
        if std::env::var("TRACE").is_ok() {
            eprintln!(
                "step {} t={} client {index} hb epoch {} owned {:?} lose={lose} -> {:?}",
                self.steps,
                self.now_ms,
                request.member_epoch,
                request
                    .owned
                    .as_ref()
                    .map(|o| o.iter().map(|(t, p)| (t[15], p.clone())).collect::<Vec<_>>()),
                outcome.as_ref().map(|s| (
                    s.answer.member_epoch,
                    s.answer
                        .assignment
                        .as_ref()
                        .map(|a| a.iter().map(|(t, p)| (t[15], p.clone())).collect::<Vec<_>>()),
                    &s.records
                ))
            );
        }
        match outcome {
            Ok(step) => {
                self.commit(&step.records);
                self.arm(&step.answer.member_id);
                let now = self.now_ms;
                let client = &mut self.clients[index];
                if lose {
                    client.settle(now, false, false);
                    client.resend_full = true;
                    return;
                }
                client.resend_full = false;
                client.epoch = step.answer.member_epoch;
                client.last_ok_ms = now;
                if request.owned.is_some() {
                    client.revoked = false;
                }
                if let Some(assignment) = step.answer.assignment {
                    // New partitions are taken at once; revoked ones are kept until revoked.
                    client.owned = union(&client.owned, &assignment);
                    client.assignment = assignment;
                }
                let reported = request.owned.as_ref() == Some(&client.owned);
                client.settle(now, true, reported);
            }
            Err(
                GroupError::FencedMemberEpoch
                | GroupError::UnknownMemberId
                | GroupError::GroupIdNotFound,
            ) => {
                let client = &mut self.clients[index];
                client.owned.clear();
                client.assignment.clear();
                client.epoch = 0;
                client.unsettled_since_ms = None;
            }
            // A static member's old incarnation still holds the id: retried later.
            Err(GroupError::UnreleasedInstanceId | GroupError::FencedInstanceId) => {}
            Err(error) => {
                self.fail(format!("unexpected heartbeat error {error:?} for {request:?}"))
            }
        }
    }

    /// The coordinator's timers after a heartbeat (`arm_timers`).
    fn arm(&mut self, member_id: &str) {
        let Some(member) = self.group.members.get(member_id) else { return };
        self.timers.session.insert(member_id.to_string(), self.now_ms + SESSION_MS);
        if member.state == MemberState::UnrevokedPartitions {
            let epoch = member.epoch;
            let entry = self.timers.revocation.get(member_id).copied();
            if entry.is_none_or(|(at_epoch, _)| at_epoch != epoch) {
                let deadline = self.now_ms + i64::from(member.meta.rebalance_timeout_ms);
                self.timers.revocation.insert(member_id.to_string(), (epoch, deadline));
            }
        } else {
            self.timers.revocation.remove(member_id);
        }
    }

    /// The coordinator's tick: fences members whose session or rebalance timeout passed.
    fn tick(&mut self) {
        let expired: Vec<String> = self
            .group
            .members
            .iter()
            .filter(|(id, member)| {
                let session = self.timers.session.get(*id).is_some_and(|at| *at <= self.now_ms);
                let revocation = self.timers.revocation.get(*id).is_some_and(|(epoch, at)| {
                    *epoch == member.epoch
                        && member.state == MemberState::UnrevokedPartitions
                        && *at <= self.now_ms
                });
                session || revocation
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let records = fence(&self.group, &id, &self.topics);
            self.commit(&records);
        }
    }

    fn revoke(&mut self, index: usize) {
        let client = &mut self.clients[index];
        let revoked = minus(&client.owned, &client.assignment);
        client.owned = minus(&client.owned, &revoked);
        client.revoked |= !revoked.is_empty();
    }

    /// A client past its rebalance timeout with a revocation owed leaves its partitions (the
    /// Java consumer leaves the group when `max.poll.interval.ms` passes).
    fn give_up_overdue(&mut self) {
        let now = self.now_ms;
        for client in &mut self.clients {
            let overdue = client
                .unsettled_since_ms
                .is_some_and(|since| now - since >= i64::from(REBALANCE_MS));
            if client.alive && overdue {
                client.owned.clear();
            }
        }
    }

    fn leave(&mut self, index: usize, epoch: i32) {
        let mut request = self.request(index, false);
        request.member_epoch = epoch;
        let existing = self.group.is_live().then_some(&self.group);
        if let Ok(step) =
            heartbeat(existing, &request, &self.topics, &self.config, self.now_ms, &|_| true)
        {
            self.commit(&step.records);
        }
        let client = &mut self.clients[index];
        client.owned.clear();
        client.assignment.clear();
        client.alive = false;
        client.static_left = epoch == -2;
    }

    /// A stopped client starts again: a new member id (a new process), epoch 0.
    fn restart(&mut self, index: usize) {
        let now = self.now_ms;
        let client = &mut self.clients[index];
        client.incarnation += 1;
        client.member_id = format!("member-{index}-{}", client.incarnation);
        client.epoch = 0;
        client.owned.clear();
        client.assignment.clear();
        client.alive = true;
        client.static_left = false;
        client.last_ok_ms = now;
        client.unsettled_since_ms = None;
    }

    fn change_topics(&mut self) {
        self.topics.version += 1;
        match self.rng.below(3) {
            0 if self.next_topic < 5 => {
                let n = self.next_topic;
                self.next_topic += 1;
                let partitions = 1 + self.rng.below(6) as i32;
                self.topics.topics.insert(format!("topic-{n}"), (topic_id(n), partitions));
            }
            1 if self.topics.topics.len() > 1 => {
                let names: Vec<String> = self.topics.topics.keys().cloned().collect();
                let victim = names[self.rng.below(names.len() as u64) as usize].clone();
                self.topics.topics.remove(&victim);
            }
            _ => {
                if let Some((_, (_, partitions))) = self.topics.topics.iter_mut().next() {
                    *partitions += 1;
                }
            }
        }
    }

    fn step(&mut self) {
        self.steps += 1;
        let live: Vec<usize> = (0..self.clients.len()).filter(|i| self.clients[*i].alive).collect();
        let pick = |rng: &mut Rng, from: &[usize]| from[rng.below(from.len() as u64) as usize];
        match self.rng.below(100) {
            0..=9 if self.clients.len() < CLIENTS_MAX => {
                let client = self.new_client();
                self.clients.push(client);
                let index = self.clients.len() - 1;
                self.heartbeat(index, true, false);
            }
            10..=49 if !live.is_empty() => {
                let index = pick(&mut self.rng, &live);
                let (full, lose) = (self.rng.chance(15), self.rng.chance(10));
                self.heartbeat(index, full, lose);
            }
            50..=64 if !live.is_empty() => {
                let index = pick(&mut self.rng, &live);
                self.revoke(index);
            }
            65..=69 if !live.is_empty() => {
                let index = pick(&mut self.rng, &live);
                self.clients[index].names = self.random_names();
                if self.rng.chance(30) {
                    let regex = ["topic-[02]", "topic-.*", "nothing"][self.rng.below(3) as usize];
                    self.clients[index].regex = self.rng.chance(50).then(|| regex.to_string());
                }
                self.heartbeat(index, true, false);
            }
            70..=72 if !live.is_empty() => {
                let index = pick(&mut self.rng, &live);
                let epoch = if self.clients[index].instance_id.is_some() && self.rng.chance(70) {
                    -2
                } else {
                    -1
                };
                self.leave(index, epoch);
            }
            73..=74 if !live.is_empty() => {
                let index = pick(&mut self.rng, &live);
                self.clients[index].alive = false; // crashed: no leave
            }
            75..=79 => {
                let stopped: Vec<usize> =
                    (0..self.clients.len()).filter(|i| !self.clients[*i].alive).collect();
                if !stopped.is_empty() {
                    let index = pick(&mut self.rng, &stopped);
                    self.restart(index);
                    self.heartbeat(index, true, false);
                }
            }
            80..=83 => self.change_topics(),
            _ => {
                let jump = match self.rng.below(10) {
                    0 => 20_000 + self.rng.below(40_000) as i64,
                    _ => 100 + self.rng.below(5_000) as i64,
                };
                self.now_ms += jump;
                self.give_up_overdue();
                self.tick();
            }
        }
        self.check();
    }

    fn check(&self) {
        // Rule 2: what live clients believe they own is disjoint.
        let mut owner: BTreeMap<(TopicId, i32), usize> = BTreeMap::new();
        for (index, client) in self.clients.iter().enumerate() {
            if !client.owns_at(self.now_ms) {
                continue;
            }
            for (topic, parts) in &client.owned {
                for partition in parts {
                    if let Some(other) = owner.insert((*topic, *partition), index) {
                        self.fail(format!(
                            "rule 2: partition {partition} of topic {} owned by clients {other} and {index}\n{:?}\n{:?}",
                            topic[15], self.clients, self.group
                        ));
                    }
                }
            }
        }
        // Rule 3: epochs.
        let group = &self.group;
        if group.assignment_epoch > group.epoch {
            self.fail(format!(
                "rule 3: assignment epoch {} > {}",
                group.assignment_epoch, group.epoch
            ));
        }
        for member in group.members.values() {
            if member.epoch > group.epoch {
                self.fail(format!("rule 3: member epoch {} > group {}", member.epoch, group.epoch));
            }
        }
        // Rule 4: replay and snapshot rebuild the group.
        if self.steps.is_multiple_of(10) {
            let mut replayed = ConsumerGroup::new(GROUP);
            for record in &self.log {
                let _ = replayed.apply(record);
            }
            let live = |g: &ConsumerGroup| g.is_live();
            if live(group) && !replayed.records_equal(group) {
                self.fail(format!("rule 4: replay differs\n{replayed:?}\n{group:?}"));
            }
            let mut snapshot = ConsumerGroup::new(GROUP);
            for record in group.snapshot() {
                if let Err(error) = snapshot.apply(&record) {
                    self.fail(format!("rule 4: snapshot conflict {error}"));
                }
            }
            if live(group) && !snapshot.records_equal(group) {
                self.fail(format!("rule 4: snapshot differs\n{snapshot:?}\n{group:?}"));
            }
        }
    }

    /// No more changes: live clients heartbeat and revoke promptly until the group settles.
    fn quiesce(&mut self) {
        for client in &mut self.clients {
            if client.alive && client.static_left {
                client.alive = false;
            }
        }
        // Sessions of stopped members end first.
        self.now_ms += SESSION_MS + 1;
        for client in &mut self.clients {
            client.last_ok_ms = client.last_ok_ms.max(self.now_ms - 1);
        }
        self.tick();
        for _ in 0..40 {
            for index in 0..self.clients.len() {
                if self.clients[index].alive {
                    self.heartbeat(index, false, false);
                    self.revoke(index);
                    self.heartbeat(index, false, false);
                }
            }
            self.now_ms += 100;
            self.check();
            if self.settled().is_ok() {
                return;
            }
        }
        if let Err(why) = self.settled() {
            self.fail(format!("did not converge: {why}\n{:?}", self.group));
        }
    }

    fn settled(&self) -> Result<(), String> {
        let group = &self.group;
        for member in group.members.values() {
            if !(member.state == MemberState::Stable && member.epoch == group.epoch) {
                return Err(format!(
                    "member {} is {:?} at {}",
                    member.id(),
                    member.state,
                    member.epoch
                ));
            }
        }
        if group.members.is_empty() {
            return Ok(());
        }
        let mut assigned: BTreeMap<(TopicId, i32), String> = BTreeMap::new();
        for member in group.members.values() {
            for (topic, parts) in &member.assigned {
                for partition in parts {
                    if assigned.insert((*topic, *partition), member.id().to_string()).is_some() {
                        return Err(format!("partition {partition} assigned twice"));
                    }
                }
            }
        }
        let subscribed = |name: &str, member: &broker::services::groups::consumer::Member| {
            member.meta.subscribed_topic_names.iter().any(|n| n == name)
                || member.meta.subscribed_topic_regex.as_ref().is_some_and(|r| {
                    group
                        .regexes
                        .get(r)
                        .is_some_and(|resolved| resolved.topics.iter().any(|t| t == name))
                })
        };
        for (name, (id, partitions)) in &self.topics.topics {
            let subscribers: Vec<&str> =
                group.members.values().filter(|m| subscribed(name, m)).map(|m| m.id()).collect();
            for partition in 0..*partitions {
                match assigned.get(&(*id, partition)) {
                    None if !subscribers.is_empty() => {
                        return Err(format!("partition {partition} of {name} unassigned"))
                    }
                    Some(owner) if !subscribers.contains(&owner.as_str()) => {
                        return Err(format!(
                            "partition {partition} of {name} given to {owner}, not a subscriber"
                        ))
                    }
                    _ => {}
                }
            }
        }
        let subscriptions: BTreeSet<_> = group
            .members
            .values()
            .map(|m| (m.meta.subscribed_topic_names.clone(), m.meta.subscribed_topic_regex.clone()))
            .collect();
        if self.config.assignors == [Assignor::Uniform] && subscriptions.len() == 1 {
            let sizes: Vec<usize> = group.members.values().map(|m| count(&m.assigned)).collect();
            let (min, max) = (sizes.iter().min(), sizes.iter().max());
            if let (Some(min), Some(max)) = (min, max) {
                if max - min > 1 {
                    return Err(format!("uniform sizes {sizes:?} differ by more than one"));
                }
            }
        }
        Ok(())
    }

    fn run(mut self) {
        for _ in 0..STEPS_PER_SEED {
            self.step();
        }
        self.quiesce();
    }
}

fn run_randomized(test: &str, assignor: Assignor) {
    let seeds = seeds::seeds(test, SEEDS_DEFAULT);
    let mut failed = Vec::new();
    for &seed in &seeds {
        if let Err(panic) = std::panic::catch_unwind(|| Sim::new(seed, assignor).run()) {
            let message = seeds::panic_message(panic);
            if seeds.len() == 1 {
                panic!("{message}\nreplay with: SEED={seed} cargo test -p broker --test consumer_group_state_machine {test}");
            }
            failed.push((seed, message.lines().next().unwrap_or_default().to_string()));
        }
    }
    if !failed.is_empty() {
        let listed: Vec<String> =
            failed.iter().take(20).map(|(seed, line)| format!("  SEED={seed}: {line}")).collect();
        panic!("{} of {} seeds failed:\n{}", failed.len(), seeds.len(), listed.join("\n"));
    }
}

#[test]
fn randomized_consumer_groups_with_the_uniform_assignor_keep_kip_848s_rules() {
    run_randomized(
        "randomized_consumer_groups_with_the_uniform_assignor_keep_kip_848s_rules",
        Assignor::Uniform,
    );
}

#[test]
fn randomized_consumer_groups_with_the_range_assignor_keep_kip_848s_rules() {
    run_randomized(
        "randomized_consumer_groups_with_the_range_assignor_keep_kip_848s_rules",
        Assignor::Range,
    );
}

/// A static member that leaves with -2 and comes back under a new member id within its
/// session gets the same partitions, with no new group epoch.
#[test]
fn a_static_member_back_within_its_session_keeps_its_partitions_without_a_rebalance() {
    let mut sim = Sim::new(7, Assignor::Uniform);
    sim.topics.topics.clear();
    sim.topics.topics.insert("topic-0".into(), (topic_id(0), 6));
    for n in 0..3 {
        let mut client = sim.new_client();
        client.names = vec!["topic-0".into()];
        client.regex = None;
        client.instance_id = Some(format!("instance-{n}"));
        sim.clients.push(client);
        sim.heartbeat(n, true, false);
    }
    sim.quiesce();
    let before = sim.group.epoch;
    let held = sim.clients[1].assignment.clone();
    assert_eq!(count(&held), 2, "{:?}", sim.group);
    sim.leave(1, -2);
    sim.now_ms += 10_000;
    sim.restart(1);
    sim.heartbeat(1, true, false);
    assert_eq!(sim.clients[1].assignment, held, "the same partitions come back");
    assert_eq!(sim.group.epoch, before, "no rebalance");
    assert_eq!(sim.clients[1].epoch, before);
}

/// A heartbeat with an epoch the member does not have is fenced; one with the previous epoch
/// (our answer was lost) is taken when it owns no more than it is assigned.
#[test]
fn a_lost_answer_is_retried_with_the_previous_epoch_and_a_wrong_epoch_is_fenced() {
    let mut sim = Sim::new(11, Assignor::Uniform);
    sim.topics.topics.clear();
    sim.topics.topics.insert("topic-0".into(), (topic_id(0), 4));
    let mut client = sim.new_client();
    client.names = vec!["topic-0".into()];
    client.regex = None;
    client.instance_id = None;
    sim.clients.push(client);
    sim.heartbeat(0, true, false);
    let epoch = sim.clients[0].epoch;
    assert_eq!(count(&sim.clients[0].assignment), 4);
    sim.topics.topics.insert("topic-0".into(), (topic_id(0), 6));
    sim.topics.version += 1;
    sim.heartbeat(0, false, true); // bumped to a new epoch; the answer is lost
    assert!(sim.group.members["member-0-0"].epoch > epoch);
    sim.heartbeat(0, true, false); // retried with the previous epoch
    assert_eq!(count(&sim.clients[0].assignment), 6);
    sim.clients[0].epoch += 5;
    sim.heartbeat(0, false, false);
    assert_eq!(sim.clients[0].epoch, 0, "fenced: it rejoins");
}
