//! Seeded randomized test of the one state transition of cluster metadata
//! (`broker::metadata::apply` and `apply_all`) and of the broker fencing decisions
//! (`decide::fence_broker`, `decide::unfence_broker`), against a plain model written here with
//! ordinary maps and vectors; the model never calls strata's `apply`.
//!
//! What it proves, for every seed:
//! - a record the model accepts is applied: `apply` returns `Ok`, and the image equals the
//!   model (topics by name and id, every partition's leader, shard, leader epoch and replicas,
//!   topic configs, broker configs, brokers with their fenced flags, the cluster id, SCRAM
//!   credentials by user and mechanism) with
//!   `version` one higher;
//! - a record the model refuses (a partition of an unknown topic id, a partition index that
//!   skips ahead, repeats or is negative, a partition with no replicas, an ISR that is empty,
//!   repeats a broker or names a non-replica, a leader outside the ISR, a taken topic name or
//!   id, a config or removal of an unknown topic, a second different cluster id, fencing or
//!   unfencing an unregistered broker, a producer-id block that does not move past the last
//!   one, the removal of a SCRAM credential the user does not have, a change of an unknown
//!   partition or one whose leader
//!   epoch goes back or stays for a new leader) is refused with the error the model names
//!   (for an invalid partition state: the variant, topic and partition), and the image the
//!   test keeps still equals the model;
//! - `apply_all` is atomic: a batch with one refused record in it fails with that record's
//!   error, and a batch of accepted records gives the image that applying them one by one gives;
//! - fencing a live broker gives records that, applied, mark it fenced, take it out of every
//!   ISR it is in (but the last member), and give every partition it led the next live ISR
//!   member as leader, else (unclean election allowed by the topic) the first live replica as
//!   the whole ISR, else no leader (-1), a leader epoch later when the leader changed;
//!   unfencing a fenced broker gives leadership to it on every leaderless partition whose ISR
//!   holds it (or, unclean election allowed, whose replicas do), one epoch later; every change
//!   bumps the partition epoch and puts a new leader on its shard for the partition; neither
//!   decides anything for an unregistered broker or one already in the state asked for.
//!
//! Replay: a failure names its seed and step and the last few steps. `SEED=<n> cargo test -p
//! broker --test metadata_apply_model` replays that one seed, and `SEEDS=<count>` runs seeds
//! `0..count` (default `SEEDS_DEFAULT`, `STEPS_PER_SEED` steps each). A run of 50 seeds or
//! more also checks that the workload still reaches every situation listed in `COVERAGE`.
//!
//! A second test, `the_comparison_tells_every_field_apart`, shows the checks can fail: an image
//! one field away from the model (a `version` not bumped, a leader epoch not set, ...) is told
//! apart from it.
//!
//! Where the documents leave room, the model takes `apply`'s documented side: a broker that
//! registers again while fenced stays fenced (apply.rs says so and why; records.rs says a
//! registration "leaves it unfenced"); a record that changes nothing (the same cluster id
//! again, fencing a fenced broker, removing an absent config) is still applied and counted in
//! `version`; a `PartitionChange` may name any leader of the ISR, including a fenced or
//! unregistered broker (liveness is `decide`'s concern, not `apply`'s).

mod seeds;

use broker::metadata::acl::{AclBinding, AclId};
use broker::metadata::decide::{fence_broker, unfence_broker, NO_LEADER};
use broker::metadata::image::{BrokerRegistration, TopicId};
use broker::metadata::quotas::{QuotaEntity, QuotaValue};
use broker::metadata::{apply, apply_all, ApplyError, MetadataImage, MetadataRecord, Placement};
use broker::sasl::scram::{ScramCredential, ScramMechanism};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use shard::runtime::ShardId;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::AssertUnwindSafe;
use wire::ids::{LeaderEpoch, NodeId, PartitionId};

const STEPS_PER_SEED: usize = 200;
const SEEDS_DEFAULT: u64 = 300;
/// Steps shown in a failure message, most recent last.
const TRACE_STEPS_MAX: usize = 12;
/// Attempts to draw a record the model judges as wanted before using a fallback.
const DRAWS_MAX: usize = 200;
/// The leader a partition has when it has none, as the model spells it (Kafka's -1).
const MODEL_NO_LEADER: i32 = -1;

const TOPIC_NAMES: [&str; 6] = ["orders", "payments", "clicks", "audit", "logs", "events"];
/// Topic records take ids `topic_id(1..=TOPIC_IDS)`; `topic_id(TOPIC_IDS + 1)` is never a
/// topic's, so a record naming it is always of an unknown topic.
const TOPIC_IDS: u8 = 9;
const TOPIC_CONFIG_KEYS: [&str; 4] =
    ["retention.ms", "cleanup.policy", "segment.bytes", "unclean.leader.election.enable"];
const CONFIG_VALUES: [&str; 5] = ["1", "1000", "compact", "delete", "true"];
const BROKER_CONFIG_RESOURCES: [&str; 4] = ["", "0", "1", "2"];
const BROKER_CONFIG_KEYS: [&str; 3] = ["log.retention.ms", "num.io.threads", "my.custom"];
const CLUSTER_IDS: [&str; 3] = ["alpha", "beta", ""];
/// Brokers `0..BROKER_NODES` may register; broker `BROKER_NODES` never does.
const BROKER_NODES: i32 = 5;
/// SCRAM users the workload names.
const SCRAM_USERS: [&str; 3] = ["alice", "bob", ""];

/// Every situation a default run must reach, so that a change to the generator cannot quietly
/// stop testing one of them.
const COVERAGE: &[&str] = &[
    "Topic: applied",
    "Partition: applied",
    "TopicConfig: applied",
    "RemoveTopic: applied",
    "BrokerConfig: applied",
    "GroupConfig: applied",
    "ClusterId: applied",
    "RegisterBroker: applied",
    "RegisterBroker: a fenced broker registers again",
    "FenceBroker: applied",
    "UnfenceBroker: applied",
    "RegisterController: applied",
    "ProducerIds: applied",
    "ProducerIds: not past the last block",
    "PartitionChange: applied",
    "PartitionReplicas: applied",
    "PartitionReplicas: bad replica lists",
    "PartitionReplicas: leader epoch goes back",
    "PartitionReplicas: bad ISR",
    "ScramCredential: applied",
    "RemoveScramCredential: applied",
    "RemoveScramCredential: no such credential",
    "ClientQuota: applied",
    "Acl: applied",
    "Acl: id taken",
    "RemoveAcl: applied",
    "RemoveAcl: unknown id",
    "Topic: name taken",
    "Topic: id taken",
    "Partition: unknown topic id",
    "Partition: index skips ahead",
    "Partition: index already taken",
    "Partition: negative index",
    "Partition: no replicas",
    "Partition: bad ISR",
    "Partition: leader outside the ISR",
    "TopicConfig: unknown topic",
    "RemoveTopic: unknown topic id",
    "ClusterId: a different id is set",
    "FenceBroker: unregistered broker",
    "UnfenceBroker: unregistered broker",
    "PartitionChange: unknown topic id",
    "PartitionChange: index past the end",
    "PartitionChange: negative index",
    "PartitionChange: leader epoch goes back",
    "PartitionChange: bad ISR",
    "PartitionChange: leader outside the ISR",
    "fence decision: moves leadership",
    "fence decision: another in-sync replica leads",
    "fence decision: an unclean election",
    "unfence decision: an unclean election",
    "fence decision: broker led nothing",
    "fence decision: unregistered broker",
    "fence decision: broker already in that state",
    "unfence decision: moves leadership",
    "unfence decision: broker led nothing",
    "unfence decision: unregistered broker",
    "unfence decision: broker already in that state",
    "batch: refused as a whole",
    "batch: equals one record at a time",
];

/// The situations `Model::changed_partition` names, per record kind.
const CHANGE_SITUATIONS: [&str; 4] = [
    "PartitionChange: unknown topic id",
    "PartitionChange: negative index",
    "PartitionChange: index past the end",
    "PartitionChange: leader epoch goes back",
];
const REPLICAS_SITUATIONS: [&str; 4] = [
    "PartitionReplicas: unknown topic id",
    "PartitionReplicas: no such partition",
    "PartitionReplicas: no such partition",
    "PartitionReplicas: leader epoch goes back",
];

// ---------------------------------------------------------------------------------------------
// The model

#[derive(Debug, Clone, PartialEq, Eq)]
struct ModelPartition {
    leader: i32,
    shard: u16,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    partition_epoch: i32,
    adding: Vec<i32>,
    removing: Vec<i32>,
}

impl ModelPartition {
    fn observed(placement: &Placement) -> Self {
        ModelPartition {
            leader: placement.leader.0,
            shard: placement.shard.0,
            leader_epoch: placement.leader_epoch.0,
            replicas: placement.replicas.iter().map(|node| node.0).collect(),
            isr: placement.isr.iter().map(|node| node.0).collect(),
            partition_epoch: placement.partition_epoch,
            adding: placement.adding.iter().map(|node| node.0).collect(),
            removing: placement.removing.iter().map(|node| node.0).collect(),
        }
    }
}

/// Why a partition's (leader, ISR, replicas) do not agree, if they do not: the situation's
/// name after `what`'s prefix.
fn partition_state_problem(leader: i32, isr: &[i32], replicas: &[i32]) -> Option<&'static str> {
    let distinct: BTreeSet<i32> = isr.iter().copied().collect();
    if replicas.is_empty() {
        return Some("no replicas");
    }
    if isr.is_empty() || distinct.len() != isr.len() || !isr.iter().all(|n| replicas.contains(n)) {
        return Some("bad ISR");
    }
    if leader != MODEL_NO_LEADER && !isr.contains(&leader) {
        return Some("leader outside the ISR");
    }
    None
}

/// `why` as a situation name with its record kind's prefix (`COVERAGE` spells them out).
fn situation(prefix: &'static str, why: &'static str) -> &'static str {
    match (prefix, why) {
        ("Partition", "no replicas") => "Partition: no replicas",
        ("Partition", "bad ISR") => "Partition: bad ISR",
        ("Partition", _) => "Partition: leader outside the ISR",
        ("PartitionReplicas", "no replicas") => "PartitionReplicas: bad replica lists",
        ("PartitionReplicas", "bad ISR") => "PartitionReplicas: bad ISR",
        ("PartitionReplicas", _) => "PartitionReplicas: leader outside the ISR",
        (_, "no replicas") => "PartitionChange: no replicas",
        (_, "bad ISR") => "PartitionChange: bad ISR",
        _ => "PartitionChange: leader outside the ISR",
    }
}

/// Two refusals are the same: equal, or both an invalid partition state of one partition
/// (the model names the situation, not `apply`'s wording).
fn same_error(a: &ApplyError, b: &ApplyError) -> bool {
    match (a, b) {
        (
            ApplyError::InvalidPartitionState(topic_a, partition_a, _),
            ApplyError::InvalidPartitionState(topic_b, partition_b, _),
        ) => topic_a == topic_b && partition_a == partition_b,
        _ => a == b,
    }
}

#[derive(Debug, Clone)]
struct ModelTopic {
    name: String,
    partitions: Vec<ModelPartition>,
    configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
struct ModelBroker {
    registration: BrokerRegistration,
    fenced: bool,
}

/// What the image should be. Topics are keyed by id here (the image keys them by name), so
/// the two do not share a lookup.
#[derive(Debug, Clone, Default)]
struct Model {
    /// Records applied so far.
    version: u64,
    cluster_id: String,
    topics: BTreeMap<TopicId, ModelTopic>,
    broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    group_configs: BTreeMap<String, BTreeMap<String, String>>,
    brokers: BTreeMap<i32, ModelBroker>,
    /// Controller-only voters' directory ids.
    controllers: BTreeMap<i32, String>,
    /// The first producer id not yet given to a broker.
    next_producer_id: i64,
    /// SCRAM credentials: (user, mechanism) → the credential.
    scram: BTreeMap<(String, ScramMechanism), ScramCredential>,
    /// Client quotas: (entity, key) → value bits.
    quotas: BTreeMap<(QuotaEntity, String), u64>,
    /// ACLs by id.
    acls: BTreeMap<AclId, AclBinding>,
}

/// Why the model refuses a record: the error `apply` must return, and the situation's name.
#[derive(Debug)]
struct Refusal {
    error: ApplyError,
    why: &'static str,
}

fn refuse(error: ApplyError, why: &'static str) -> Result<(), Refusal> {
    Err(Refusal { error, why })
}

impl Model {
    fn id_of(&self, name: &str) -> Option<TopicId> {
        self.topics.iter().find(|(_, topic)| topic.name == name).map(|(id, _)| *id)
    }

    fn partition_count(&self, topic_id: &TopicId) -> i32 {
        self.topics.get(topic_id).map_or(0, |topic| topic.partitions.len() as i32)
    }

    /// The partition a leader change names (`PartitionChange`, `PartitionReplicas`), with
    /// the leader-epoch rule checked, and the error of an invalid state of it; a refusal is
    /// named by `situations`: unknown topic id, negative index, index past the end, leader
    /// epoch goes back.
    fn changed_partition(
        &self,
        situations: &[&'static str; 4],
        topic_id: &TopicId,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
    ) -> Result<(&ModelPartition, ApplyError), Refusal> {
        let Some(topic) = self.topics.get(topic_id) else {
            return Err(Refusal {
                error: ApplyError::UnknownTopicId(*topic_id),
                why: situations[0],
            });
        };
        let error = ApplyError::UnknownPartition(topic.name.clone(), partition);
        if partition < 0 {
            return Err(Refusal { error, why: situations[1] });
        }
        let Some(current) = topic.partitions.get(partition as usize) else {
            return Err(Refusal { error, why: situations[2] });
        };
        let invalid =
            ApplyError::InvalidPartitionState(topic.name.clone(), partition, String::new());
        if leader_epoch < current.leader_epoch
            || (leader != current.leader && leader_epoch == current.leader_epoch)
        {
            return Err(Refusal { error: invalid, why: situations[3] });
        }
        Ok((current, invalid))
    }

    /// Whether `record` fits the model, and if not, why.
    fn verdict(&self, record: &MetadataRecord) -> Result<(), Refusal> {
        match record {
            MetadataRecord::Topic { name, topic_id } => {
                if self.id_of(name).is_some() {
                    return refuse(ApplyError::TopicExists(name.clone()), "Topic: name taken");
                }
                if self.topics.contains_key(topic_id) {
                    return refuse(ApplyError::TopicExists(name.clone()), "Topic: id taken");
                }
            }
            MetadataRecord::Partition { topic_id, partition, placement } => {
                let Some(topic) = self.topics.get(topic_id) else {
                    return refuse(
                        ApplyError::UnknownTopicId(*topic_id),
                        "Partition: unknown topic id",
                    );
                };
                let count = topic.partitions.len() as i32;
                let why = match partition.0 {
                    index if index < 0 => "Partition: negative index",
                    index if index < count => "Partition: index already taken",
                    index if index > count => "Partition: index skips ahead",
                    _ => {
                        let observed = ModelPartition::observed(placement);
                        let problem = partition_state_problem(
                            observed.leader,
                            &observed.isr,
                            &observed.replicas,
                        );
                        return match problem {
                            Some(why) => refuse(
                                ApplyError::InvalidPartitionState(
                                    topic.name.clone(),
                                    partition.0,
                                    String::new(),
                                ),
                                situation("Partition", why),
                            ),
                            None => Ok(()),
                        };
                    }
                };
                let error = ApplyError::PartitionGap {
                    topic: topic.name.clone(),
                    partition: partition.0,
                    count,
                };
                return refuse(error, why);
            }
            MetadataRecord::TopicConfig { topic, .. } => {
                if self.id_of(topic).is_none() {
                    return refuse(
                        ApplyError::UnknownTopic(topic.clone()),
                        "TopicConfig: unknown topic",
                    );
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                if !self.topics.contains_key(topic_id) {
                    return refuse(
                        ApplyError::UnknownTopicId(*topic_id),
                        "RemoveTopic: unknown topic id",
                    );
                }
            }
            MetadataRecord::ClusterId { cluster_id } => {
                if !self.cluster_id.is_empty() && self.cluster_id != *cluster_id {
                    return refuse(
                        ApplyError::ClusterIdSet(self.cluster_id.clone()),
                        "ClusterId: a different id is set",
                    );
                }
            }
            MetadataRecord::FenceBroker { node } | MetadataRecord::UnfenceBroker { node } => {
                if !self.brokers.contains_key(&node.0) {
                    let why = match record {
                        MetadataRecord::FenceBroker { .. } => "FenceBroker: unregistered broker",
                        _ => "UnfenceBroker: unregistered broker",
                    };
                    return refuse(ApplyError::UnknownBroker(node.0), why);
                }
            }
            MetadataRecord::PartitionChange { topic_id, partition, leader, leader_epoch, isr } => {
                let (current, invalid) = self.changed_partition(
                    &CHANGE_SITUATIONS,
                    topic_id,
                    partition.0,
                    leader.0,
                    leader_epoch.0,
                )?;
                let next_isr: Vec<i32> = match isr {
                    Some(isr) => isr.iter().map(|node| node.0).collect(),
                    None => current.isr.clone(),
                };
                if let Some(why) = partition_state_problem(leader.0, &next_isr, &current.replicas) {
                    return refuse(invalid, situation("PartitionChange", why));
                }
            }
            MetadataRecord::PartitionReplicas {
                topic_id,
                partition,
                replicas,
                isr,
                adding,
                removing,
                leader,
                leader_epoch,
            } => {
                let (_, invalid) = self.changed_partition(
                    &REPLICAS_SITUATIONS,
                    topic_id,
                    partition.0,
                    leader.0,
                    leader_epoch.0,
                )?;
                let ids = |nodes: &[NodeId]| nodes.iter().map(|n| n.0).collect::<Vec<i32>>();
                let (replicas, isr) = (ids(replicas), ids(isr));
                let (adding, removing) = (ids(adding), ids(removing));
                let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
                let lists_fit = distinct.len() == replicas.len()
                    && adding.iter().chain(&removing).all(|node| replicas.contains(node))
                    && !adding.iter().any(|node| removing.contains(node));
                if !lists_fit {
                    return refuse(invalid, "PartitionReplicas: bad replica lists");
                }
                if let Some(why) = partition_state_problem(leader.0, &isr, &replicas) {
                    return refuse(invalid, situation("PartitionReplicas", why));
                }
            }
            MetadataRecord::ProducerIds { next, .. } => {
                if *next <= self.next_producer_id {
                    return refuse(
                        ApplyError::ProducerIdsBehind(*next, self.next_producer_id),
                        "ProducerIds: not past the last block",
                    );
                }
            }
            MetadataRecord::RemoveScramCredential { user, mechanism } => {
                if !self.scram.contains_key(&(user.clone(), *mechanism)) {
                    return refuse(
                        ApplyError::UnknownScramCredential(user.clone(), mechanism.name()),
                        "RemoveScramCredential: no such credential",
                    );
                }
            }
            MetadataRecord::Acl { id, .. } => {
                if self.acls.contains_key(id) {
                    return refuse(ApplyError::AclExists(*id), "Acl: id taken");
                }
            }
            MetadataRecord::RemoveAcl { id } => {
                if !self.acls.contains_key(id) {
                    return refuse(ApplyError::UnknownAcl(*id), "RemoveAcl: unknown id");
                }
            }
            MetadataRecord::BrokerConfig { .. }
            | MetadataRecord::GroupConfig { .. }
            | MetadataRecord::RegisterBroker { .. }
            | MetadataRecord::RegisterController { .. }
            | MetadataRecord::ScramCredential { .. }
            | MetadataRecord::ClientQuota { .. } => {}
        }
        Ok(())
    }

    /// The model after `record`, which `verdict` accepted.
    fn apply(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::Topic { name, topic_id } => {
                let topic = ModelTopic {
                    name: name.clone(),
                    partitions: Vec::new(),
                    configs: BTreeMap::new(),
                };
                self.topics.insert(*topic_id, topic);
            }
            MetadataRecord::Partition { topic_id, placement, .. } => {
                let topic = self.topics.get_mut(topic_id).expect("verdict: the topic exists");
                topic.partitions.push(ModelPartition::observed(placement));
            }
            MetadataRecord::TopicConfig { topic, key, value } => {
                let topic_id = self.id_of(topic).expect("verdict: the topic exists");
                let configs = &mut self.topics.get_mut(&topic_id).expect("just found").configs;
                match value {
                    Some(value) => configs.insert(key.clone(), value.clone()),
                    None => configs.remove(key),
                };
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                self.topics.remove(topic_id);
            }
            MetadataRecord::BrokerConfig { resource, key, value } => match value {
                Some(value) => {
                    let configs = self.broker_configs.entry(resource.clone()).or_default();
                    configs.insert(key.clone(), value.clone());
                }
                None => {
                    if let Some(configs) = self.broker_configs.get_mut(resource) {
                        configs.remove(key);
                        if configs.is_empty() {
                            self.broker_configs.remove(resource);
                        }
                    }
                }
            },
            MetadataRecord::GroupConfig { group, key, value } => match value {
                Some(value) => {
                    let configs = self.group_configs.entry(group.clone()).or_default();
                    configs.insert(key.clone(), value.clone());
                }
                None => {
                    if let Some(configs) = self.group_configs.get_mut(group) {
                        configs.remove(key);
                        if configs.is_empty() {
                            self.group_configs.remove(group);
                        }
                    }
                }
            },
            MetadataRecord::ClusterId { cluster_id } => self.cluster_id = cluster_id.clone(),
            MetadataRecord::RegisterBroker { broker } => {
                let fenced = self.brokers.get(&broker.node.0).is_some_and(|known| known.fenced);
                self.brokers
                    .insert(broker.node.0, ModelBroker { registration: broker.clone(), fenced });
            }
            MetadataRecord::RegisterController { node, directory_id } => {
                self.controllers.insert(node.0, directory_id.clone());
            }
            MetadataRecord::ProducerIds { next, .. } => self.next_producer_id = *next,
            MetadataRecord::ScramCredential { user, mechanism, credential } => {
                self.scram.insert((user.clone(), *mechanism), credential.clone());
            }
            MetadataRecord::RemoveScramCredential { user, mechanism } => {
                self.scram.remove(&(user.clone(), *mechanism));
            }
            MetadataRecord::ClientQuota { entity, key, value } => match value {
                Some(value) => {
                    self.quotas.insert((entity.clone(), key.clone()), value.0.to_bits());
                }
                None => {
                    self.quotas.remove(&(entity.clone(), key.clone()));
                }
            },
            MetadataRecord::Acl { id, binding } => {
                self.acls.insert(*id, binding.clone());
            }
            MetadataRecord::RemoveAcl { id } => {
                self.acls.remove(id);
            }
            MetadataRecord::FenceBroker { node } => {
                self.brokers.get_mut(&node.0).expect("verdict: registered").fenced = true;
            }
            MetadataRecord::UnfenceBroker { node } => {
                self.brokers.get_mut(&node.0).expect("verdict: registered").fenced = false;
            }
            MetadataRecord::PartitionChange { topic_id, partition, leader, leader_epoch, isr } => {
                let shards = self.brokers.get(&leader.0).map(|b| b.registration.shards);
                let topic = self.topics.get_mut(topic_id).expect("verdict: the topic exists");
                let name = topic.name.clone();
                let placement = &mut topic.partitions[partition.0 as usize];
                if leader.0 != placement.leader {
                    if let Some(shards) = shards {
                        placement.shard = model_shard(&name, partition.0, shards);
                    }
                }
                placement.leader = leader.0;
                placement.leader_epoch = leader_epoch.0;
                if let Some(isr) = isr {
                    placement.isr = isr.iter().map(|node| node.0).collect();
                }
                placement.partition_epoch += 1;
            }
            MetadataRecord::PartitionReplicas {
                topic_id,
                partition,
                replicas,
                isr,
                adding,
                removing,
                leader,
                leader_epoch,
            } => {
                let shards = self.brokers.get(&leader.0).map(|b| b.registration.shards);
                let topic = self.topics.get_mut(topic_id).expect("verdict: the topic exists");
                let name = topic.name.clone();
                let placement = &mut topic.partitions[partition.0 as usize];
                if leader.0 != placement.leader {
                    if let Some(shards) = shards {
                        placement.shard = model_shard(&name, partition.0, shards);
                    }
                }
                let ids = |nodes: &[NodeId]| nodes.iter().map(|n| n.0).collect::<Vec<i32>>();
                placement.leader = leader.0;
                placement.leader_epoch = leader_epoch.0;
                placement.replicas = ids(replicas);
                placement.isr = ids(isr);
                placement.adding = ids(adding);
                placement.removing = ids(removing);
                placement.partition_epoch += 1;
            }
        }
        self.version += 1;
    }

    /// Whether a live (registered, unfenced) broker.
    fn live(&self, node: i32) -> bool {
        self.brokers.get(&node).is_some_and(|broker| !broker.fenced)
    }

    /// Moves a partition to (`leader`, `isr`) as a decision does: a leader epoch later when
    /// the leader changes (on its shard there), a partition epoch later always. Whether it
    /// changed.
    fn decided(
        &self,
        name: &str,
        index: usize,
        partition: &mut ModelPartition,
        leader: i32,
        isr: Vec<i32>,
    ) -> bool {
        if leader == partition.leader && isr == partition.isr {
            return false;
        }
        if leader != partition.leader {
            partition.leader_epoch += 1;
            if let Some(broker) = self.brokers.get(&leader) {
                partition.shard = model_shard(name, index as i32, broker.registration.shards);
            }
        }
        partition.leader = leader;
        partition.isr = isr;
        partition.partition_epoch += 1;
        true
    }

    /// The model after fencing the live broker `node`. Returns how many partitions changed
    /// (one record each) and whether another in-sync replica or an unclean election took
    /// over one of them.
    fn fence(&mut self, node: i32) -> (usize, bool, bool) {
        self.brokers.get_mut(&node).expect("a registered broker").fenced = true;
        let (mut changed, mut in_sync, mut unclean) = (0, false, false);
        let mut topics = std::mem::take(&mut self.topics);
        for topic in topics.values_mut() {
            let unclean_allowed = topic_unclean(topic);
            for (index, partition) in topic.partitions.iter_mut().enumerate() {
                if partition.leader != node && !partition.isr.contains(&node) {
                    continue;
                }
                let mut isr: Vec<i32> =
                    partition.isr.iter().copied().filter(|n| *n != node).collect();
                if isr.is_empty() {
                    isr.push(node);
                }
                let mut leader = partition.leader;
                if leader == node {
                    leader = MODEL_NO_LEADER;
                    if let Some(next) = isr.iter().copied().find(|n| *n != node && self.live(*n)) {
                        leader = next;
                        in_sync = true;
                    } else if unclean_allowed {
                        let candidate = partition
                            .replicas
                            .iter()
                            .copied()
                            .find(|n| *n != node && self.live(*n));
                        if let Some(candidate) = candidate {
                            leader = candidate;
                            isr = vec![candidate];
                            unclean = true;
                        }
                    }
                }
                if self.decided(&topic.name, index, partition, leader, isr) {
                    changed += 1;
                }
            }
        }
        self.topics = topics;
        self.version += 1 + changed as u64;
        (changed, in_sync, unclean)
    }

    /// The model after unfencing the fenced broker `node`: it leads every leaderless
    /// partition whose ISR holds it, or (unclean allowed) whose replicas do. Returns how many
    /// changed, and whether an unclean election did.
    fn unfence(&mut self, node: i32) -> (usize, bool, bool) {
        self.brokers.get_mut(&node).expect("a registered broker").fenced = false;
        let (mut changed, mut unclean) = (0, false);
        let mut topics = std::mem::take(&mut self.topics);
        for topic in topics.values_mut() {
            let unclean_allowed = topic_unclean(topic);
            for (index, partition) in topic.partitions.iter_mut().enumerate() {
                if partition.leader != MODEL_NO_LEADER {
                    continue;
                }
                let isr = if partition.isr.contains(&node) {
                    partition.isr.clone()
                } else if unclean_allowed && partition.replicas.contains(&node) {
                    unclean = true;
                    vec![node]
                } else {
                    continue;
                };
                if self.decided(&topic.name, index, partition, node, isr) {
                    changed += 1;
                }
            }
        }
        self.topics = topics;
        self.version += 1 + changed as u64;
        (changed, false, unclean)
    }
}

/// Whether the model's topic allows unclean leader election (its own config: the model sets
/// no broker default for it).
fn topic_unclean(topic: &ModelTopic) -> bool {
    topic.configs.get("unclean.leader.election.enable").map(String::as_str) == Some("true")
}

/// The shard a broker with `shards` shards owns a partition on (the placement function).
fn model_shard(topic: &str, partition: i32, shards: u16) -> u16 {
    let shards = usize::from(shards).clamp(1, shard::runtime::SHARDS_MAX);
    shard::runtime::shard_of(topic, partition, shards).0
}

/// The first way `image` differs from `model`, if any.
fn compare(model: &Model, image: &MetadataImage) -> Result<(), String> {
    if image.version != model.version {
        return Err(format!(
            "the image's version is {}, but the model counts {} applied records",
            image.version, model.version
        ));
    }
    if image.cluster_id != model.cluster_id {
        return Err(format!(
            "the cluster id is {:?}, the model's {:?}",
            image.cluster_id, model.cluster_id
        ));
    }
    if image.broker_configs != model.broker_configs {
        return Err(format!(
            "the broker configs are {:?}, the model's {:?}",
            image.broker_configs, model.broker_configs
        ));
    }
    if image.group_configs != model.group_configs {
        return Err(format!(
            "the group configs are {:?}, the model's {:?}",
            image.group_configs, model.group_configs
        ));
    }
    compare_brokers(model, image)?;
    if image.next_producer_id != model.next_producer_id {
        return Err(format!(
            "the next producer id is {}, the model's {}",
            image.next_producer_id, model.next_producer_id
        ));
    }
    let scram: BTreeMap<(String, ScramMechanism), ScramCredential> = image
        .scram
        .iter()
        .flat_map(|(user, credentials)| {
            credentials.iter().map(|(m, c)| ((user.clone(), *m), c.clone()))
        })
        .collect();
    if scram != model.scram || image.scram.values().any(|credentials| credentials.is_empty()) {
        return Err(format!(
            "the SCRAM credentials are {:?}, the model's {:?}",
            image.scram, model.scram
        ));
    }
    let quotas: BTreeMap<(QuotaEntity, String), u64> = image
        .quotas
        .iter()
        .flat_map(|(entity, values)| {
            values.iter().map(|(key, value)| ((entity.clone(), key.clone()), value.0.to_bits()))
        })
        .collect();
    if quotas != model.quotas || image.quotas.values().any(|values| values.is_empty()) {
        return Err(format!("the quotas are {:?}, the model's {:?}", image.quotas, model.quotas));
    }
    let acls: BTreeMap<AclId, AclBinding> =
        image.acls.iter().map(|(id, binding)| (*id, binding.clone())).collect();
    if acls != model.acls {
        return Err(format!("the ACLs are {acls:?}, the model's {:?}", model.acls));
    }
    // The index a check reads agrees with the list: each ACL covers its own resource name.
    for binding in acls.values() {
        if !image.acls.covering(binding.resource_type, &binding.resource_name).any(|b| b == binding)
        {
            return Err(format!("{binding:?} is stored but not indexed"));
        }
    }
    let controllers: BTreeMap<i32, String> =
        image.controllers.iter().map(|(node, dir)| (node.0, dir.clone())).collect();
    if controllers != model.controllers {
        return Err(format!(
            "the controllers are {controllers:?}, the model's {:?}",
            model.controllers
        ));
    }
    compare_topics(model, image)
}

fn compare_brokers(model: &Model, image: &MetadataImage) -> Result<(), String> {
    let registered: Vec<i32> = image.brokers.keys().map(|node| node.0).collect();
    let expected: Vec<i32> = model.brokers.keys().copied().collect();
    if registered != expected {
        return Err(format!("the registered brokers are {registered:?}, the model's {expected:?}"));
    }
    for (node, broker) in &model.brokers {
        let held = &image.brokers[&NodeId(*node)];
        if held.registration != broker.registration {
            return Err(format!(
                "broker {node}'s registration is {:?}, the model's {:?}",
                held.registration, broker.registration
            ));
        }
        if held.fenced != broker.fenced {
            return Err(format!(
                "broker {node} is fenced: {}, in the model: {}",
                held.fenced, broker.fenced
            ));
        }
    }
    Ok(())
}

fn compare_topics(model: &Model, image: &MetadataImage) -> Result<(), String> {
    for (key, topic) in &image.topics {
        if *key != topic.name {
            return Err(format!("the topic keyed {key:?} is named {:?}", topic.name));
        }
    }
    let names: BTreeSet<&str> = image.topics.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = model.topics.values().map(|topic| topic.name.as_str()).collect();
    if names != expected {
        return Err(format!("the topics are {names:?}, the model's {expected:?}"));
    }
    for (topic_id, topic) in &model.topics {
        let name = &topic.name;
        let held = &image.topics[name];
        if held.topic_id != *topic_id {
            return Err(format!("{name}'s id is {:?}, the model's {topic_id:?}", held.topic_id));
        }
        if held.configs != topic.configs {
            return Err(format!(
                "{name}'s configs are {:?}, the model's {:?}",
                held.configs, topic.configs
            ));
        }
        let partitions: Vec<ModelPartition> =
            held.partitions.iter().map(ModelPartition::observed).collect();
        if partitions.len() != topic.partitions.len() {
            return Err(format!(
                "{name} has {} partitions, the model {}",
                partitions.len(),
                topic.partitions.len()
            ));
        }
        let mut pairs = partitions.iter().zip(&topic.partitions).enumerate();
        if let Some((index, (held, expected))) =
            pairs.find(|(_, (held, expected))| held != expected)
        {
            return Err(format!("{name}-{index} is {held:?}, in the model {expected:?}"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Random records, valid and not

fn topic_id(number: u8) -> TopicId {
    let mut id = [0; 16];
    id[0] = number;
    id[15] = number.wrapping_mul(31);
    id
}

/// A registered broker most of the time, else any node id (possibly unregistered).
fn random_node(rng: &mut StdRng, model: &Model) -> i32 {
    let registered: Vec<i32> = model.brokers.keys().copied().collect();
    match registered.choose(rng) {
        Some(node) if rng.gen_bool(0.7) => *node,
        _ => rng.gen_range(0..=BROKER_NODES),
    }
}

/// A known topic's id with `known_probability`, else an id that may or may not be known.
fn random_topic_id(rng: &mut StdRng, model: &Model, known_probability: f64) -> TopicId {
    let known: Vec<TopicId> = model.topics.keys().copied().collect();
    match known.choose(rng) {
        Some(topic_id) if rng.gen_bool(known_probability) => *topic_id,
        _ => topic_id(rng.gen_range(1..=TOPIC_IDS + 1)),
    }
}

fn random_topic_name(rng: &mut StdRng, model: &Model) -> String {
    let known: Vec<&str> = model.topics.values().map(|topic| topic.name.as_str()).collect();
    match known.choose(rng) {
        Some(name) if rng.gen_bool(0.8) => name.to_string(),
        _ => TOPIC_NAMES.choose(rng).expect("names").to_string(),
    }
}

fn random_placement(rng: &mut StdRng, model: &Model) -> Placement {
    let replica_count = match rng.gen_range(0..20) {
        0 => 0,
        1..=12 => 1,
        13..=17 => 2,
        _ => 3,
    };
    let mut replicas = Vec::new();
    for _ in 0..10 {
        let node = random_node(rng, model);
        if replicas.len() < replica_count && !replicas.contains(&node) {
            replicas.push(node);
        }
    }
    let leader = match replicas.first() {
        Some(first) if rng.gen_bool(0.85) => *first,
        _ if rng.gen_bool(0.3) => MODEL_NO_LEADER,
        _ => random_node(rng, model),
    };
    // Mostly a valid ISR: the leader (or, leaderless, the first replica) and maybe another
    // replica; sometimes anything.
    let mut isr: Vec<i32> = match leader {
        MODEL_NO_LEADER => replicas.iter().take(1).copied().collect(),
        leader => vec![leader],
    };
    if let Some(other) = replicas.iter().find(|node| !isr.contains(node)) {
        if rng.gen_bool(0.4) {
            isr.push(*other);
        }
    }
    match rng.gen_range(0..12) {
        0 => isr.clear(),
        1 => isr.push(random_node(rng, model)),
        // In sync, but not the leader.
        2 => isr = replicas.iter().copied().filter(|node| *node != leader).take(1).collect(),
        _ => {}
    }
    Placement {
        leader: NodeId(leader),
        shard: ShardId(rng.gen_range(0..4)),
        leader_epoch: LeaderEpoch(rng.gen_range(0..5)),
        replicas: replicas.into_iter().map(NodeId).collect(),
        isr: isr.into_iter().map(NodeId).collect(),
        partition_epoch: rng.gen_range(0..3),
        adding: Vec::new(),
        removing: Vec::new(),
    }
}

fn random_registration(rng: &mut StdRng) -> BrokerRegistration {
    let node = rng.gen_range(0..BROKER_NODES);
    BrokerRegistration {
        node: NodeId(node),
        incarnation: rng.gen(),
        directory_id: format!("directory-{}", rng.gen_range(0..3)),
        host: format!("broker-{node}.strata"),
        port: rng.gen_range(9092..9096),
        rack: ["a", "b"].choose(rng).filter(|_| rng.gen_bool(0.5)).map(|rack| rack.to_string()),
        shards: rng.gen_range(1..=8),
        listeners: Vec::new(),
    }
}

fn random_topic(rng: &mut StdRng, model: &Model) -> MetadataRecord {
    let free_names: Vec<&str> =
        TOPIC_NAMES.iter().copied().filter(|name| model.id_of(name).is_none()).collect();
    let free_ids: Vec<TopicId> =
        (1..=TOPIC_IDS).map(topic_id).filter(|id| !model.topics.contains_key(id)).collect();
    let name = match free_names.choose(rng) {
        Some(name) if rng.gen_bool(0.75) => name,
        _ => TOPIC_NAMES.choose(rng).expect("names"),
    };
    let topic_id = match free_ids.choose(rng) {
        Some(topic_id) if rng.gen_bool(0.75) => *topic_id,
        _ => topic_id(rng.gen_range(1..=TOPIC_IDS)),
    };
    MetadataRecord::Topic { name: name.to_string(), topic_id }
}

fn random_partition(rng: &mut StdRng, model: &Model) -> MetadataRecord {
    let topic_id = random_topic_id(rng, model, 0.85);
    let count = model.partition_count(&topic_id);
    let partition = match rng.gen_range(0..10) {
        0 => count + rng.gen_range(1..=3),
        1 if count > 0 => rng.gen_range(0..count),
        2 => -rng.gen_range(1..=2),
        _ => count,
    };
    let placement = random_placement(rng, model);
    MetadataRecord::Partition { topic_id, partition: PartitionId(partition), placement }
}

fn random_value(rng: &mut StdRng, set_probability: f64) -> Option<String> {
    let value = CONFIG_VALUES.choose(rng).expect("values").to_string();
    Some(value).filter(|_| rng.gen_bool(set_probability))
}

fn random_partition_change(rng: &mut StdRng, model: &Model) -> MetadataRecord {
    let topic_id = random_topic_id(rng, model, 0.85);
    let count = model.partition_count(&topic_id);
    let partition = match rng.gen_range(0..10) {
        0 => count,
        1 => -1,
        2 => count + 5,
        _ if count > 0 => rng.gen_range(0..count),
        _ => 0,
    };
    let current = model
        .topics
        .get(&topic_id)
        .and_then(|topic| topic.partitions.get(usize::try_from(partition).ok()?))
        .cloned();
    // Mostly a member of the ISR (kept, or a new ISR of replicas holding it), sometimes any.
    let (leader, isr) = match &current {
        Some(current) if rng.gen_bool(0.8) => {
            let isr = if rng.gen_bool(0.5) {
                None
            } else {
                let mut isr: Vec<i32> =
                    current.replicas.iter().copied().filter(|_| rng.gen_bool(0.6)).collect();
                if isr.is_empty() {
                    isr = current.replicas.iter().take(1).copied().collect();
                }
                Some(isr)
            };
            let members = isr.clone().unwrap_or_else(|| current.isr.clone());
            let leader = match members.choose(rng) {
                Some(member) if rng.gen_bool(0.8) => *member,
                _ => MODEL_NO_LEADER,
            };
            (leader, isr)
        }
        _ => {
            let leader = if rng.gen_bool(0.25) { MODEL_NO_LEADER } else { random_node(rng, model) };
            let isr = rng.gen_bool(0.3).then(|| vec![random_node(rng, model)]);
            (leader, isr)
        }
    };
    let leader_epoch = match &current {
        Some(current) if rng.gen_bool(0.8) => {
            current.leader_epoch + i32::from(leader != current.leader || rng.gen_bool(0.3))
        }
        _ => rng.gen_range(0..20),
    };
    MetadataRecord::PartitionChange {
        topic_id,
        partition: PartitionId(partition),
        leader: NodeId(leader),
        leader_epoch: LeaderEpoch(leader_epoch),
        isr: isr.map(|isr| isr.into_iter().map(NodeId).collect()),
    }
}

/// A replica-set change (a reassignment step), mostly one that fits: replicas of registered
/// brokers (sometimes one twice), adding and removing drawn from them (sometimes overlapping
/// or outside), an ISR of them holding the leader (sometimes not).
fn random_partition_replicas(rng: &mut StdRng, model: &Model) -> MetadataRecord {
    let topic_id = random_topic_id(rng, model, 0.9);
    let count = model.partition_count(&topic_id);
    let partition = match rng.gen_range(0..10) {
        0 => count,
        _ if count > 0 => rng.gen_range(0..count),
        _ => 0,
    };
    let current = model
        .topics
        .get(&topic_id)
        .and_then(|topic| topic.partitions.get(usize::try_from(partition).ok()?))
        .cloned();
    let mut replicas: Vec<i32> = Vec::new();
    for _ in 0..rng.gen_range(1..=4) {
        let node = random_node(rng, model);
        if !replicas.contains(&node) || rng.gen_bool(0.05) {
            replicas.push(node);
        }
    }
    let mut adding: Vec<i32> = replicas.iter().copied().filter(|_| rng.gen_bool(0.3)).collect();
    let mut removing: Vec<i32> =
        replicas.iter().copied().filter(|n| !adding.contains(n) && rng.gen_bool(0.3)).collect();
    match rng.gen_range(0..20) {
        0 => adding.push(BROKER_NODES),
        1 => removing.extend(adding.first().copied()),
        _ => {}
    }
    let mut isr: Vec<i32> = replicas.iter().copied().filter(|_| rng.gen_bool(0.7)).collect();
    isr.dedup();
    let leader = match isr.choose(rng) {
        Some(member) if rng.gen_bool(0.85) => *member,
        _ if rng.gen_bool(0.5) => MODEL_NO_LEADER,
        _ => random_node(rng, model),
    };
    let leader_epoch = match &current {
        Some(current) if rng.gen_bool(0.85) => {
            current.leader_epoch + i32::from(leader != current.leader || rng.gen_bool(0.3))
        }
        _ => rng.gen_range(0..20),
    };
    let nodes = |ids: Vec<i32>| ids.into_iter().map(NodeId).collect::<Vec<_>>();
    MetadataRecord::PartitionReplicas {
        topic_id,
        partition: PartitionId(partition),
        replicas: nodes(replicas),
        isr: nodes(isr),
        adding: nodes(adding),
        removing: nodes(removing),
        leader: NodeId(leader),
        leader_epoch: LeaderEpoch(leader_epoch),
    }
}

/// Any record, drawn near the model's state so that both verdicts are common.
fn random_record(rng: &mut StdRng, model: &Model) -> MetadataRecord {
    match rng.gen_range(0..100) {
        0..=11 => random_topic(rng, model),
        12..=31 => random_partition(rng, model),
        32..=41 => MetadataRecord::TopicConfig {
            topic: random_topic_name(rng, model),
            key: TOPIC_CONFIG_KEYS.choose(rng).expect("keys").to_string(),
            value: random_value(rng, 0.7),
        },
        42..=46 => MetadataRecord::RemoveTopic { topic_id: random_topic_id(rng, model, 0.7) },
        47..=51 => MetadataRecord::BrokerConfig {
            resource: BROKER_CONFIG_RESOURCES.choose(rng).expect("resources").to_string(),
            key: BROKER_CONFIG_KEYS.choose(rng).expect("keys").to_string(),
            value: random_value(rng, 0.6),
        },
        52..=54 => MetadataRecord::GroupConfig {
            group: ["g1", "g2"].choose(rng).expect("groups").to_string(),
            key: ["consumer.session.timeout.ms", "share.auto.offset.reset"]
                .choose(rng)
                .expect("keys")
                .to_string(),
            value: random_value(rng, 0.6),
        },
        55..=58 => MetadataRecord::ClusterId {
            cluster_id: CLUSTER_IDS.choose(rng).expect("ids").to_string(),
        },
        59..=68 => MetadataRecord::RegisterBroker { broker: random_registration(rng) },
        69..=76 => MetadataRecord::FenceBroker { node: NodeId(random_node(rng, model)) },
        77..=82 => MetadataRecord::UnfenceBroker { node: NodeId(random_node(rng, model)) },
        83 => MetadataRecord::ProducerIds {
            node: NodeId(random_node(rng, model)),
            next: model.next_producer_id + rng.gen_range(-1..=2) * 1000,
        },
        84 => MetadataRecord::RegisterController {
            node: NodeId(rng.gen_range(0..BROKER_NODES)),
            directory_id: format!("controller-directory-{}", rng.gen_range(0..3)),
        },
        85..=91 => random_partition_change(rng, model),
        92..=93 => MetadataRecord::ScramCredential {
            user: SCRAM_USERS.choose(rng).expect("users").to_string(),
            mechanism: *ScramMechanism::ALL.choose(rng).expect("mechanisms"),
            credential: ScramCredential {
                salt: vec![rng.gen(); 4],
                stored_key: vec![rng.gen(); 32],
                server_key: vec![rng.gen(); 32],
                iterations: rng.gen_range(4096..=16384),
            },
        },
        94 => MetadataRecord::RemoveScramCredential {
            user: SCRAM_USERS.choose(rng).expect("users").to_string(),
            mechanism: *ScramMechanism::ALL.choose(rng).expect("mechanisms"),
        },
        95 => {
            let name = |rng: &mut StdRng| match rng.gen_range(0..3) {
                0 => None,
                1 => Some(None),
                _ => Some(Some(SCRAM_USERS.choose(rng).expect("names").to_string())),
            };
            MetadataRecord::ClientQuota {
                entity: QuotaEntity { user: name(rng), client_id: name(rng), ip: None },
                key: ["producer_byte_rate", "consumer_byte_rate"]
                    .choose(rng)
                    .expect("k")
                    .to_string(),
                value: rng.gen_bool(0.7).then(|| QuotaValue(rng.gen_range(1..1000) as f64)),
            }
        }
        96 => MetadataRecord::Acl {
            // A small id space, so ids are taken again and removals find them.
            id: [rng.gen_range(0..4); 16],
            binding: AclBinding::from_wire(
                rng.gen_range(2..=5),
                if rng.gen_bool(0.5) { "a-" } else { "kafka-cluster" },
                rng.gen_range(3..=4),
                "User:alice",
                "*",
                rng.gen_range(2..=12),
                rng.gen_range(2..=3),
            )
            .unwrap_or_else(|_| {
                AclBinding::from_wire(2, "t", 3, "User:bob", "*", 3, 3).expect("a valid binding")
            }),
        },
        97 => MetadataRecord::RemoveAcl { id: [rng.gen_range(0..4); 16] },
        _ => random_partition_replicas(rng, model),
    }
}

/// A record the model accepts (`valid`) or refuses, with the model's verdict.
fn judged_record(
    rng: &mut StdRng,
    model: &Model,
    valid: bool,
) -> (MetadataRecord, Result<(), Refusal>) {
    for _ in 0..DRAWS_MAX {
        let record = random_record(rng, model);
        let verdict = model.verdict(&record);
        if verdict.is_ok() == valid {
            return (record, verdict);
        }
    }
    // A broker config is always accepted; broker BROKER_NODES never registers.
    let record = if valid {
        MetadataRecord::BrokerConfig {
            resource: String::new(),
            key: "my.custom".into(),
            value: Some("1".into()),
        }
    } else {
        MetadataRecord::FenceBroker { node: NodeId(BROKER_NODES) }
    };
    let verdict = model.verdict(&record);
    (record, verdict)
}

fn kind(record: &MetadataRecord) -> &'static str {
    match record {
        MetadataRecord::Topic { .. } => "Topic: applied",
        MetadataRecord::Partition { .. } => "Partition: applied",
        MetadataRecord::TopicConfig { .. } => "TopicConfig: applied",
        MetadataRecord::RemoveTopic { .. } => "RemoveTopic: applied",
        MetadataRecord::BrokerConfig { .. } => "BrokerConfig: applied",
        MetadataRecord::GroupConfig { .. } => "GroupConfig: applied",
        MetadataRecord::ClusterId { .. } => "ClusterId: applied",
        MetadataRecord::RegisterBroker { .. } => "RegisterBroker: applied",
        MetadataRecord::FenceBroker { .. } => "FenceBroker: applied",
        MetadataRecord::UnfenceBroker { .. } => "UnfenceBroker: applied",
        MetadataRecord::RegisterController { .. } => "RegisterController: applied",
        MetadataRecord::ProducerIds { .. } => "ProducerIds: applied",
        MetadataRecord::PartitionChange { .. } => "PartitionChange: applied",
        MetadataRecord::PartitionReplicas { .. } => "PartitionReplicas: applied",
        MetadataRecord::ScramCredential { .. } => "ScramCredential: applied",
        MetadataRecord::RemoveScramCredential { .. } => "RemoveScramCredential: applied",
        MetadataRecord::ClientQuota { .. } => "ClientQuota: applied",
        MetadataRecord::Acl { .. } => "Acl: applied",
        MetadataRecord::RemoveAcl { .. } => "RemoveAcl: applied",
    }
}

// ---------------------------------------------------------------------------------------------
// One seeded run

struct Run {
    rng: StdRng,
    image: MetadataImage,
    model: Model,
    step: usize,
    trace: VecDeque<String>,
    coverage: BTreeMap<&'static str, u64>,
}

impl Run {
    fn new(seed: u64) -> Self {
        Run {
            rng: StdRng::seed_from_u64(seed),
            image: MetadataImage::default(),
            model: Model::default(),
            step: 0,
            trace: VecDeque::new(),
            coverage: BTreeMap::new(),
        }
    }

    fn note(&mut self, what: String) {
        if self.trace.len() == TRACE_STEPS_MAX {
            self.trace.pop_front();
        }
        self.trace.push_back(format!("step {}: {what}", self.step));
    }

    fn cover(&mut self, situation: &'static str) {
        *self.coverage.entry(situation).or_default() += 1;
    }

    fn fail(&self, what: String) -> ! {
        let trace: Vec<&str> = self.trace.iter().map(String::as_str).collect();
        panic!("{what}\nlast steps, oldest first:\n  {}", trace.join("\n  "));
    }

    fn step_once(&mut self) {
        match self.rng.gen_range(0..100) {
            0..=69 => self.apply_one_record(),
            70..=79 => self.fence_or_unfence_decision(true),
            80..=89 => self.fence_or_unfence_decision(false),
            90..=94 => self.batch_with_a_refused_record(),
            _ => self.batch_of_accepted_records(),
        }
        if let Err(difference) = compare(&self.model, &self.image) {
            self.fail(format!("after the step, {difference}"));
        }
    }

    fn apply_one_record(&mut self) {
        let record = random_record(&mut self.rng, &self.model);
        let verdict = self.model.verdict(&record);
        self.note(format!("apply {record:?}; the model: {verdict:?}"));
        let reregisters_fenced = matches!(&record, MetadataRecord::RegisterBroker { broker }
            if self.model.brokers.get(&broker.node.0).is_some_and(|known| known.fenced));
        match (verdict, apply(self.image.clone(), &record)) {
            (Ok(()), Ok(next)) => {
                self.model.apply(&record);
                if let Err(difference) = compare(&self.model, &next) {
                    self.fail(format!("after applying {record:?}, {difference}"));
                }
                self.image = next;
                self.cover(kind(&record));
                if reregisters_fenced {
                    self.cover("RegisterBroker: a fenced broker registers again");
                }
            }
            (Ok(()), Err(error)) => {
                self.fail(format!("the model accepts {record:?}, but apply refused it: {error}"))
            }
            (Err(refusal), Ok(_)) => self.fail(format!(
                "the model refuses {record:?} ({}), but apply accepted it",
                refusal.why
            )),
            (Err(refusal), Err(error)) => {
                if !same_error(&error, &refusal.error) {
                    self.fail(format!(
                        "apply refused {record:?} with {error:?}; the model expected {:?}",
                        refusal.error
                    ));
                }
                self.cover(refusal.why);
            }
        }
    }

    /// A broker the decision would act on, most of the time, else any node id.
    fn broker_to_decide_on(&mut self, fence: bool) -> i32 {
        let candidates: Vec<i32> = self
            .model
            .brokers
            .iter()
            .filter(|(_, broker)| broker.fenced != fence)
            .map(|(node, _)| *node)
            .collect();
        match candidates.choose(&mut self.rng) {
            Some(node) if self.rng.gen_bool(0.7) => *node,
            _ => self.rng.gen_range(0..=BROKER_NODES),
        }
    }

    fn fence_or_unfence_decision(&mut self, fence: bool) {
        let node = self.broker_to_decide_on(fence);
        let (decision, decide): (&str, Decision) =
            if fence { ("fence", fence_broker) } else { ("unfence", unfence_broker) };
        let records = decide(&self.image, NodeId(node));
        self.note(format!("{decision} broker {node}: {records:?}"));
        let situation = match self.model.brokers.get(&node).map(|broker| broker.fenced) {
            None => Some(if fence {
                "fence decision: unregistered broker"
            } else {
                "unfence decision: unregistered broker"
            }),
            Some(fenced) if fenced == fence => Some(if fence {
                "fence decision: broker already in that state"
            } else {
                "unfence decision: broker already in that state"
            }),
            Some(_) => None,
        };
        if let Some(situation) = situation {
            if !records.is_empty() {
                self.fail(format!("{decision} of broker {node} ({situation}) decided {records:?}"));
            }
            self.cover(situation);
            return;
        }
        let mut expected = self.model.clone();
        let (changed, in_sync, unclean) =
            if fence { expected.fence(node) } else { expected.unfence(node) };
        if records.len() != 1 + changed {
            self.fail(format!(
                "{decision} of broker {node} decided {} records, the model {} (the broker and \
                 {changed} partitions): {records:?}",
                records.len(),
                1 + changed
            ));
        }
        let next = match apply_all(&self.image, &records) {
            Ok(next) => next,
            Err(error) => self.fail(format!("{decision} of broker {node} does not apply: {error}")),
        };
        if let Err(difference) = compare(&expected, &next) {
            self.fail(format!("after the {decision} of broker {node}, {difference}"));
        }
        self.image = next;
        self.model = expected;
        if in_sync {
            self.cover("fence decision: another in-sync replica leads");
        }
        if unclean {
            self.cover(if fence {
                "fence decision: an unclean election"
            } else {
                "unfence decision: an unclean election"
            });
        }
        self.cover(match (fence, changed > 0) {
            (true, true) => "fence decision: moves leadership",
            (true, false) => "fence decision: broker led nothing",
            (false, true) => "unfence decision: moves leadership",
            (false, false) => "unfence decision: broker led nothing",
        });
    }

    fn batch_with_a_refused_record(&mut self) {
        let mut scratch = self.model.clone();
        let mut batch = Vec::new();
        for _ in 0..self.rng.gen_range(0..5) {
            let (record, _) = judged_record(&mut self.rng, &scratch, true);
            scratch.apply(&record);
            batch.push(record);
        }
        let (refused, verdict) = judged_record(&mut self.rng, &scratch, false);
        let refusal = verdict.expect_err("judged_record gives a refused record");
        batch.push(refused);
        // What follows the refused record does not matter: the batch stops there.
        for _ in 0..self.rng.gen_range(0..4) {
            batch.push(random_record(&mut self.rng, &scratch));
        }
        self.note(format!("apply_all {batch:?}; the model expects {:?}", refusal.error));
        let before = self.image.clone();
        match apply_all(&self.image, &batch) {
            Ok(_) => self.fail(format!(
                "apply_all accepted a batch with a refused record ({})",
                refusal.why
            )),
            Err(error) if !same_error(&error, &refusal.error) => self.fail(format!(
                "apply_all refused the batch with {error:?}; the model expected {:?}",
                refusal.error
            )),
            Err(_) => {}
        }
        if self.image != before {
            self.fail("a refused apply_all changed the image it was given".to_string());
        }
        self.cover("batch: refused as a whole");
    }

    fn batch_of_accepted_records(&mut self) {
        let mut scratch = self.model.clone();
        let mut batch = Vec::new();
        for _ in 0..self.rng.gen_range(1..=8) {
            let (record, _) = judged_record(&mut self.rng, &scratch, true);
            scratch.apply(&record);
            batch.push(record);
        }
        self.note(format!("apply_all {batch:?}"));
        let batched = match apply_all(&self.image, &batch) {
            Ok(next) => next,
            Err(error) => {
                self.fail(format!("apply_all refused a batch the model accepts: {error}"))
            }
        };
        let one_at_a_time = batch.iter().try_fold(self.image.clone(), apply);
        let one_at_a_time = match one_at_a_time {
            Ok(next) => next,
            Err(error) => self.fail(format!("apply refused a record the model accepts: {error}")),
        };
        if batched != one_at_a_time {
            let difference = compare(&scratch, &batched).err().unwrap_or_default();
            self.fail(format!(
                "apply_all gives another image than one record at a time: {difference}"
            ));
        }
        if let Err(difference) = compare(&scratch, &batched) {
            self.fail(format!("after apply_all, {difference}"));
        }
        self.image = batched;
        self.model = scratch;
        self.cover("batch: equals one record at a time");
    }
}

/// `decide::fence_broker` or `decide::unfence_broker`.
type Decision = fn(&MetadataImage, NodeId) -> Vec<MetadataRecord>;

/// A change to one field of an image, named.
type ImageChange = (&'static str, fn(&mut MetadataImage));

fn run_seed(seed: u64, step: &Cell<usize>) -> BTreeMap<&'static str, u64> {
    let mut run = Run::new(seed);
    for number in 1..=STEPS_PER_SEED {
        step.set(number);
        run.step = number;
        run.step_once();
    }
    run.coverage
}

fn seeds() -> Vec<u64> {
    seeds::seeds("metadata_apply_model", SEEDS_DEFAULT)
}

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
        .unwrap_or_default()
}

#[test]
fn randomized_records_change_the_image_exactly_as_the_model_says() {
    assert_eq!(NO_LEADER, NodeId(MODEL_NO_LEADER), "no leader is Kafka's -1");
    let seeds = seeds();
    let mut coverage: BTreeMap<&'static str, u64> = BTreeMap::new();
    for &seed in &seeds {
        let step = Cell::new(0);
        match std::panic::catch_unwind(AssertUnwindSafe(|| run_seed(seed, &step))) {
            Ok(run) => {
                for (situation, count) in run {
                    *coverage.entry(situation).or_default() += count;
                }
            }
            Err(panic) => panic!(
                "seed {seed}, step {}: {}\nreplay with: SEED={seed} cargo test -p broker --test \
                 metadata_apply_model",
                step.get(),
                panic_message(panic)
            ),
        }
    }
    eprintln!("{} seeds, {STEPS_PER_SEED} steps each: {coverage:?}", seeds.len());
    if seeds.len() >= 50 {
        for situation in COVERAGE {
            assert!(
                coverage.get(situation).is_some_and(|count| *count > 0),
                "no seed reached `{situation}`: the workload lost coverage"
            );
        }
    }
}

fn first_partition(image: &mut MetadataImage) -> &mut Placement {
    let topic = image.topics.values_mut().next().expect("a topic");
    topic.partitions.first_mut().expect("a partition")
}

/// The checks above are only as good as `compare`: each field it covers, changed in an image
/// that otherwise equals the model, must be told apart. (This is what catches an `apply` that
/// forgot to bump `version`, or to set a leader epoch.)
#[test]
fn the_comparison_tells_every_field_apart() {
    let mut model = Model::default();
    let records = [
        MetadataRecord::ClusterId { cluster_id: "alpha".into() },
        MetadataRecord::RegisterBroker {
            broker: BrokerRegistration {
                node: NodeId(1),
                incarnation: [3; 16],
                directory_id: "directory-0".into(),
                host: "broker-1.strata".into(),
                port: 9092,
                rack: None,
                shards: 2,
                listeners: Vec::new(),
            },
        },
        MetadataRecord::Topic { name: "orders".into(), topic_id: topic_id(1) },
        MetadataRecord::Partition {
            topic_id: topic_id(1),
            partition: PartitionId(0),
            placement: Placement {
                leader: NodeId(1),
                shard: ShardId(1),
                leader_epoch: LeaderEpoch(0),
                replicas: vec![NodeId(1)],
                isr: vec![NodeId(1)],
                partition_epoch: 0,
                adding: Vec::new(),
                removing: Vec::new(),
            },
        },
        MetadataRecord::TopicConfig {
            topic: "orders".into(),
            key: "retention.ms".into(),
            value: Some("1000".into()),
        },
        MetadataRecord::BrokerConfig {
            resource: String::new(),
            key: "num.io.threads".into(),
            value: Some("8".into()),
        },
        MetadataRecord::GroupConfig {
            group: "g".into(),
            key: "consumer.session.timeout.ms".into(),
            value: Some("50000".into()),
        },
    ];
    for record in &records {
        assert!(model.verdict(record).is_ok(), "{record:?}");
        model.apply(record);
    }
    let image = apply_all(&MetadataImage::default(), &records).expect("valid records");
    assert_eq!(compare(&model, &image), Ok(()));
    let changes: [ImageChange; 18] = [
        ("version not bumped", |image| image.version -= 1),
        ("cluster id", |image| image.cluster_id = "beta".into()),
        ("broker config", |image| image.broker_configs.clear()),
        ("group config", |image| image.group_configs.clear()),
        ("fenced flag", |image| image.brokers.values_mut().for_each(|broker| broker.fenced = true)),
        ("registration", |image| {
            image.brokers.values_mut().for_each(|broker| broker.registration.port = 1)
        }),
        ("topic id", |image| {
            image.topics.values_mut().for_each(|topic| topic.topic_id = topic_id(2))
        }),
        ("topic config", |image| image.topics.values_mut().for_each(|topic| topic.configs.clear())),
        ("leader", |image| first_partition(image).leader = NO_LEADER),
        ("leader epoch", |image| first_partition(image).leader_epoch = LeaderEpoch(1)),
        ("replicas", |image| first_partition(image).replicas.clear()),
        ("shard", |image| first_partition(image).shard = ShardId(0)),
        ("isr", |image| first_partition(image).isr.push(NodeId(2))),
        ("partition epoch", |image| first_partition(image).partition_epoch = 3),
        ("next producer id", |image| image.next_producer_id = 7),
        ("controllers", |image| {
            image.controllers.insert(NodeId(9), "directory-9".into());
        }),
        ("scram credentials", |image| {
            let credential = ScramCredential {
                salt: vec![1],
                stored_key: vec![2],
                server_key: vec![3],
                iterations: 4096,
            };
            image.scram.entry("zed".into()).or_default().insert(ScramMechanism::Sha256, credential);
        }),
        ("quotas", |image| {
            let entity = QuotaEntity { user: Some(None), client_id: None, ip: None };
            let values = [("producer_byte_rate".to_string(), QuotaValue(5.0))].into();
            image.quotas.insert(entity, values);
        }),
    ];
    for (what, change) in changes {
        let mut changed = image.clone();
        change(&mut changed);
        assert!(compare(&model, &changed).is_err(), "a changed {what} went unnoticed");
    }
}
