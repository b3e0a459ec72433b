//! `MetadataImage`: the node's view of the cluster metadata at one version. Immutable once
//! published; a change builds the next image with `metadata::apply`.
//!
//! Runs on: any shard (shared read-only).

use super::client_quota::{QuotaEntity, QuotaValue};
use super::placement::Placement;
use crate::sasl::scram::{ScramCredential, ScramMechanism};
use shard::runtime::ShardId;
use std::collections::BTreeMap;
use wire::ids::{NodeId, TopicPartition};

/// A topic id (KIP-516), 16 bytes as on the wire.
pub type TopicId = [u8; 16];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: TopicId,
    /// Placement of each partition, indexed by partition id (contiguous from 0).
    pub partitions: Vec<Placement>,
    /// Config overrides; keys are Kafka topic config names.
    pub configs: BTreeMap<String, String>,
}

impl TopicImage {
    pub fn partition_count(&self) -> i32 {
        i32::try_from(self.partitions.len()).unwrap_or(i32::MAX)
    }

    pub fn placement(&self, partition: i32) -> Option<&Placement> {
        usize::try_from(partition).ok().and_then(|index| self.partitions.get(index))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    pub cluster_id: String,
    /// Records applied since the cluster was created (the image's version).
    pub version: u64,
    pub topics: BTreeMap<String, TopicImage>,
    /// Dynamic broker configs (AlterConfigs on the BROKER resource): resource ("" for the
    /// cluster-wide default, else a node id) → key → value.
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Group configs (the GROUP resource, `metadata::group_config`): group → key → value.
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Registered brokers (a cluster with a controller quorum; empty for a single node, which
    /// serves as its own only broker).
    pub brokers: BTreeMap<NodeId, BrokerImage>,
    /// Controller-only voters' data directory ids (`RegisterController`): what a voter that
    /// is not also a broker is known by, for the wiped-voter guard.
    pub controllers: BTreeMap<NodeId, String>,
    /// The first producer id no broker has been given yet (`ProducerIds` blocks).
    pub next_producer_id: i64,
    /// SCRAM credentials (KIP-554): user → mechanism → salt, keys and iterations.
    pub scram: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    /// Client quotas (KIP-546): entity → quota key → value.
    pub quotas: BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>,
    /// ACLs (issue #18), by id and by resource pattern.
    pub acls: super::acl::Acls,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerImage {
    pub registration: BrokerRegistration,
    pub fenced: bool,
}

impl MetadataImage {
    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, topic_id: &TopicId) -> Option<&TopicImage> {
        self.topics.values().find(|topic| topic.topic_id == *topic_id)
    }

    /// Where a partition is placed, or `None` when the topic or partition does not exist.
    pub fn placement(&self, partition: &TopicPartition) -> Option<&Placement> {
        self.topics.get(&partition.topic)?.placement(partition.partition.0)
    }

    /// The unfenced registered brokers, by id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|broker| !broker.fenced).map(|broker| &broker.registration)
    }

    /// A user's SCRAM credential for `mechanism`.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Option<&ScramCredential> {
        self.scram.get(user)?.get(&mechanism)
    }

    pub fn partition_count(&self) -> usize {
        self.topics.values().map(|topic| topic.partitions.len()).sum()
    }

    /// The shard of `node` that keeps its replica of `partition`, leader or follower: the
    /// leader's is the placement's; a follower's is the one `shard_of` picks among that
    /// broker's shards, which is also the one it gets when it becomes the leader, so a
    /// leadership change never moves files between shards. `None` when `node` holds no replica.
    pub fn replica_shard(&self, partition: &TopicPartition, node: NodeId) -> Option<ShardId> {
        let placement = self.placement(partition)?;
        if placement.leader == node {
            return Some(placement.shard);
        }
        if !placement.replicas.contains(&node) {
            return None;
        }
        let shards = usize::from(self.brokers.get(&node)?.registration.shards);
        Some(shard::runtime::shard_of(
            &partition.topic,
            partition.partition.0,
            shards.clamp(1, shard::runtime::SHARDS_MAX),
        ))
    }
}

/// What a broker registers: where clients reach it, its rack, and its shard count (a
/// partition placed on it gets one of its shards).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub node: wire::ids::NodeId,
    /// A random id per process start (Kafka's incarnation id).
    pub incarnation: [u8; 16],
    /// Its data directory's `directory.id` (`meta.properties`): a voter whose directory
    /// differs from the one registered was wiped or replaced (KIP-853's guard).
    pub directory_id: String,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
    pub shards: u16,
    /// Every client listener's advertised endpoint, by listener name (Kafka's registration
    /// `endPoints`), so a client is answered with the brokers' endpoints of the listener it
    /// came in on. `host` and `port` are the inter-broker listener's. Empty in registrations
    /// written before listeners were registered: that one endpoint serves every listener.
    pub listeners: Vec<RegisteredListener>,
}

/// A broker's advertised endpoint on one named listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredListener {
    pub name: String,
    pub host: String,
    pub port: u16,
}
