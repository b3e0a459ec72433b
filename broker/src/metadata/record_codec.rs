//! Metadata records as the controller's Raft log stores them: serde_json of a tagged enum
//! (ARCHITECTURE.md, "Cluster control plane"). A separate stored form, as `store` has for the
//! image, so the in-memory records can change shape without changing the log's.
//!
//! Format: `{"type": "topic", "name": ..., "topic_id": [16 bytes]}`, `{"type": "partition",
//! "topic_id", "partition", "placement": {"leader", "shard", "leader_epoch", "replicas",
//! "isr", "partition_epoch"}}` (the last two added later: absent means the leader alone in
//! sync, epoch 0), `{"type": "partition_change", ..., "isr"}` (absent: unchanged),
//! `{"type": "topic_config", "topic", "key", "value"}`, `{"type": "remove_topic", "topic_id"}`,
//! `{"type": "broker_config", "resource", "key", "value"}`; `value` null removes;
//! `{"type": "partition_replicas", "topic_id", "partition", "replicas", "isr", "adding",
//! "removing", "leader", "leader_epoch"}` (a reassignment step, issue #16), and placements
//! carry "adding" and "removing" while one runs (absent: none); a registered broker carries
//! "listeners": [{"name", "host", "port"}] (issue #18; absent: its one endpoint serves all);
//! `{"type": "scram_credential", "user", "mechanism": "SCRAM-SHA-256", "salt": [bytes],
//! "stored_key": [bytes], "server_key": [bytes], "iterations"}` and `{"type":
//! "remove_scram_credential", "user", "mechanism"}` (issue #18); `{"type": "client_quota",
//! "entity": [["user", "alice"], ["client-id", null]], "key", "value"}` (null name: the
//! default; null value: removed); `{"type": "acl", "id": [16 bytes], "resource_type":
//! "TOPIC", "resource_name", "pattern_type": "LITERAL", "principal": "User:alice", "host":
//! "*", "operation": "READ", "permission": "ALLOW"}` and `{"type": "remove_acl", "id"}`.
//! Invariant: variants are only ever added. An unknown `type` fails to decode, and the node
//! stops with the error rather than skip a record (a skipped record would fork the image).

use super::acl::{AclBinding, AclId, AclOperation, PatternType, Permission, ResourceType};
use super::client_quota::{QuotaEntity, QuotaValue};
use super::image::{RegisteredListener, TopicId};
use super::placement::Placement;
use super::records::{BrokerRegistration, MetadataRecord};
use crate::sasl::scram::{ScramCredential, ScramMechanism};
use serde::{Deserialize, Serialize};
use shard::runtime::ShardId;
use wire::ids::{LeaderEpoch, NodeId, PartitionId};

/// A partition's placement as stored (also in the controller's log records).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredPlacement {
    leader: i32,
    shard: u16,
    leader_epoch: i32,
    replicas: Vec<i32>,
    /// Absent in records and files written before it existed: the leader then (or, with no
    /// leader, the first replica) was the only in-sync replica.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    isr: Vec<i32>,
    #[serde(default, skip_serializing_if = "is_zero")]
    partition_epoch: i32,
    /// A reassignment in progress (added with issue #16; absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    adding: Vec<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    removing: Vec<i32>,
}

fn is_zero(value: &i32) -> bool {
    *value == 0
}

/// The ISR of a placement stored before ISRs were: the leader, or the first replica.
fn derived_isr(leader: i32, replicas: &[i32]) -> Vec<i32> {
    if leader >= 0 {
        vec![leader]
    } else {
        replicas.iter().take(1).copied().collect()
    }
}

impl From<&Placement> for StoredPlacement {
    fn from(p: &Placement) -> Self {
        StoredPlacement {
            leader: p.leader.0,
            shard: p.shard.0,
            leader_epoch: p.leader_epoch.0,
            replicas: p.replicas.iter().map(|node| node.0).collect(),
            isr: p.isr.iter().map(|node| node.0).collect(),
            partition_epoch: p.partition_epoch,
            adding: p.adding.iter().map(|node| node.0).collect(),
            removing: p.removing.iter().map(|node| node.0).collect(),
        }
    }
}

impl From<StoredPlacement> for Placement {
    fn from(p: StoredPlacement) -> Self {
        let isr = if p.isr.is_empty() { derived_isr(p.leader, &p.replicas) } else { p.isr };
        Placement {
            leader: NodeId(p.leader),
            shard: ShardId(p.shard),
            leader_epoch: LeaderEpoch(p.leader_epoch),
            replicas: p.replicas.into_iter().map(NodeId).collect(),
            isr: isr.into_iter().map(NodeId).collect(),
            partition_epoch: p.partition_epoch,
            adding: p.adding.into_iter().map(NodeId).collect(),
            removing: p.removing.into_iter().map(NodeId).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum StoredRecord {
    Topic {
        name: String,
        topic_id: TopicId,
    },
    Partition {
        topic_id: TopicId,
        partition: i32,
        placement: StoredPlacement,
    },
    TopicConfig {
        topic: String,
        key: String,
        value: Option<String>,
    },
    RemoveTopic {
        topic_id: TopicId,
    },
    BrokerConfig {
        resource: String,
        key: String,
        value: Option<String>,
    },
    /// (Added within format 2: a log without them has none.)
    GroupConfig {
        group: String,
        key: String,
        value: Option<String>,
    },
    ClusterId {
        cluster_id: String,
    },
    RegisterBroker {
        broker: StoredBroker,
    },
    FenceBroker {
        node: i32,
    },
    UnfenceBroker {
        node: i32,
    },
    RegisterController {
        node: i32,
        directory_id: String,
    },
    ProducerIds {
        node: i32,
        next: i64,
    },
    PartitionChange {
        topic_id: TopicId,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        /// The new ISR; absent: unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        isr: Option<Vec<i32>>,
    },
    PartitionReplicas {
        topic_id: TopicId,
        partition: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        adding: Vec<i32>,
        removing: Vec<i32>,
        leader: i32,
        leader_epoch: i32,
    },
    ScramCredential(StoredScram),
    RemoveScramCredential {
        user: String,
        mechanism: StoredMechanism,
    },
    ClientQuota {
        entity: StoredQuotaEntity,
        key: String,
        value: Option<QuotaValue>,
    },
    Acl(StoredAcl),
    RemoveAcl {
        id: AclId,
    },
}

/// An ACL as stored (in records and in `strata-metadata.json`): its id and its binding by
/// names (`"resource_type": "TOPIC"`, `"pattern_type": "PREFIXED"`, `"operation": "READ"`,
/// `"permission": "ALLOW"`), never codes, so a stored ACL cannot change meaning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoredAcl {
    pub(crate) id: AclId,
    resource_type: ResourceType,
    resource_name: String,
    pattern_type: PatternType,
    principal: String,
    host: String,
    operation: AclOperation,
    permission: Permission,
}

impl StoredAcl {
    pub(crate) fn new(id: AclId, binding: &AclBinding) -> Self {
        let binding = binding.clone();
        StoredAcl {
            id,
            resource_type: binding.resource_type,
            resource_name: binding.resource_name,
            pattern_type: binding.pattern_type,
            principal: binding.principal,
            host: binding.host,
            operation: binding.operation,
            permission: binding.permission,
        }
    }

    pub(crate) fn binding(self) -> AclBinding {
        AclBinding {
            resource_type: self.resource_type,
            resource_name: self.resource_name,
            pattern_type: self.pattern_type,
            principal: self.principal,
            host: self.host,
            operation: self.operation,
            permission: self.permission,
        }
    }
}

/// A quota entity's type as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum StoredEntityType {
    #[serde(rename = "user")]
    User,
    #[serde(rename = "client-id")]
    ClientId,
    #[serde(rename = "ip")]
    Ip,
}

/// A quota entity as stored: (type, name or null for the default) pairs.
pub(crate) type StoredQuotaEntity = Vec<(StoredEntityType, Option<String>)>;

pub(crate) fn stored_entity(entity: &QuotaEntity) -> StoredQuotaEntity {
    [
        (StoredEntityType::User, &entity.user),
        (StoredEntityType::ClientId, &entity.client_id),
        (StoredEntityType::Ip, &entity.ip),
    ]
    .into_iter()
    .filter_map(|(kind, name)| name.as_ref().map(|name| (kind, name.clone())))
    .collect()
}

pub(crate) fn entity_of(stored: StoredQuotaEntity) -> QuotaEntity {
    let mut entity = QuotaEntity::default();
    for (kind, name) in stored {
        let slot = match kind {
            StoredEntityType::User => &mut entity.user,
            StoredEntityType::ClientId => &mut entity.client_id,
            StoredEntityType::Ip => &mut entity.ip,
        };
        *slot = Some(name);
    }
    entity
}

/// A SCRAM mechanism as stored: its SASL name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum StoredMechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl From<ScramMechanism> for StoredMechanism {
    fn from(mechanism: ScramMechanism) -> Self {
        match mechanism {
            ScramMechanism::Sha256 => StoredMechanism::Sha256,
            ScramMechanism::Sha512 => StoredMechanism::Sha512,
        }
    }
}

impl From<StoredMechanism> for ScramMechanism {
    fn from(mechanism: StoredMechanism) -> Self {
        match mechanism {
            StoredMechanism::Sha256 => ScramMechanism::Sha256,
            StoredMechanism::Sha512 => ScramMechanism::Sha512,
        }
    }
}

/// A SCRAM credential as stored (in records and in `strata-metadata.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoredScram {
    pub(crate) user: String,
    pub(crate) mechanism: StoredMechanism,
    salt: Vec<u8>,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
    iterations: i32,
}

impl StoredScram {
    pub(crate) fn new(user: &str, mechanism: ScramMechanism, credential: &ScramCredential) -> Self {
        StoredScram {
            user: user.to_string(),
            mechanism: mechanism.into(),
            salt: credential.salt.clone(),
            stored_key: credential.stored_key.clone(),
            server_key: credential.server_key.clone(),
            iterations: credential.iterations,
        }
    }

    pub(crate) fn credential(&self) -> ScramCredential {
        ScramCredential {
            salt: self.salt.clone(),
            stored_key: self.stored_key.clone(),
            server_key: self.server_key.clone(),
            iterations: self.iterations,
        }
    }
}

fn ids(nodes: &[NodeId]) -> Vec<i32> {
    nodes.iter().map(|node| node.0).collect()
}

fn nodes(ids: Vec<i32>) -> Vec<NodeId> {
    ids.into_iter().map(NodeId).collect()
}

/// A broker registration as stored (also in `strata-metadata.json`'s snapshots).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoredBroker {
    node: i32,
    incarnation: [u8; 16],
    directory_id: String,
    host: String,
    port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rack: Option<String>,
    shards: u16,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    fenced: bool,
    /// Every client listener's endpoint (added with issue #18; absent: the one above serves
    /// every listener).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    listeners: Vec<StoredListener>,
}

/// A registered listener's endpoint as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoredListener {
    name: String,
    host: String,
    port: u16,
}

impl StoredBroker {
    pub(crate) fn from_registration(broker: &BrokerRegistration, fenced: bool) -> StoredBroker {
        StoredBroker {
            node: broker.node.0,
            incarnation: broker.incarnation,
            directory_id: broker.directory_id.clone(),
            host: broker.host.clone(),
            port: broker.port,
            rack: broker.rack.clone(),
            shards: broker.shards,
            fenced,
            listeners: broker
                .listeners
                .iter()
                .map(|l| StoredListener {
                    name: l.name.clone(),
                    host: l.host.clone(),
                    port: l.port,
                })
                .collect(),
        }
    }

    /// The registration, and whether the broker is fenced.
    pub(crate) fn into_registration(self) -> (BrokerRegistration, bool) {
        let registration = BrokerRegistration {
            node: NodeId(self.node),
            incarnation: self.incarnation,
            directory_id: self.directory_id,
            host: self.host,
            port: self.port,
            rack: self.rack,
            shards: self.shards,
            listeners: self
                .listeners
                .into_iter()
                .map(|l| RegisteredListener { name: l.name, host: l.host, port: l.port })
                .collect(),
        };
        (registration, self.fenced)
    }
}

impl From<&MetadataRecord> for StoredRecord {
    fn from(record: &MetadataRecord) -> Self {
        match record.clone() {
            MetadataRecord::Topic { name, topic_id } => StoredRecord::Topic { name, topic_id },
            MetadataRecord::Partition { topic_id, partition, placement } => {
                StoredRecord::Partition {
                    topic_id,
                    partition: partition.0,
                    placement: StoredPlacement::from(&placement),
                }
            }
            MetadataRecord::TopicConfig { topic, key, value } => {
                StoredRecord::TopicConfig { topic, key, value }
            }
            MetadataRecord::RemoveTopic { topic_id } => StoredRecord::RemoveTopic { topic_id },
            MetadataRecord::BrokerConfig { resource, key, value } => {
                StoredRecord::BrokerConfig { resource, key, value }
            }
            MetadataRecord::GroupConfig { group, key, value } => {
                StoredRecord::GroupConfig { group, key, value }
            }
            MetadataRecord::ClusterId { cluster_id } => StoredRecord::ClusterId { cluster_id },
            MetadataRecord::RegisterBroker { broker } => StoredRecord::RegisterBroker {
                broker: StoredBroker::from_registration(&broker, false),
            },
            MetadataRecord::FenceBroker { node } => StoredRecord::FenceBroker { node: node.0 },
            MetadataRecord::UnfenceBroker { node } => StoredRecord::UnfenceBroker { node: node.0 },
            MetadataRecord::RegisterController { node, directory_id } => {
                StoredRecord::RegisterController { node: node.0, directory_id }
            }
            MetadataRecord::ProducerIds { node, next } => {
                StoredRecord::ProducerIds { node: node.0, next }
            }
            MetadataRecord::PartitionChange { topic_id, partition, leader, leader_epoch, isr } => {
                StoredRecord::PartitionChange {
                    topic_id,
                    partition: partition.0,
                    leader: leader.0,
                    leader_epoch: leader_epoch.0,
                    isr: isr.map(|isr| isr.iter().map(|node| node.0).collect()),
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
            } => StoredRecord::PartitionReplicas {
                topic_id,
                partition: partition.0,
                replicas: ids(&replicas),
                isr: ids(&isr),
                adding: ids(&adding),
                removing: ids(&removing),
                leader: leader.0,
                leader_epoch: leader_epoch.0,
            },
            MetadataRecord::ScramCredential { user, mechanism, credential } => {
                StoredRecord::ScramCredential(StoredScram::new(&user, mechanism, &credential))
            }
            MetadataRecord::RemoveScramCredential { user, mechanism } => {
                StoredRecord::RemoveScramCredential { user, mechanism: mechanism.into() }
            }
            MetadataRecord::ClientQuota { entity, key, value } => {
                StoredRecord::ClientQuota { entity: stored_entity(&entity), key, value }
            }
            MetadataRecord::Acl { id, binding } => StoredRecord::Acl(StoredAcl::new(id, &binding)),
            MetadataRecord::RemoveAcl { id } => StoredRecord::RemoveAcl { id },
        }
    }
}

impl From<StoredRecord> for MetadataRecord {
    fn from(record: StoredRecord) -> Self {
        match record {
            StoredRecord::Topic { name, topic_id } => MetadataRecord::Topic { name, topic_id },
            StoredRecord::Partition { topic_id, partition, placement } => {
                MetadataRecord::Partition {
                    topic_id,
                    partition: PartitionId(partition),
                    placement: placement.into(),
                }
            }
            StoredRecord::TopicConfig { topic, key, value } => {
                MetadataRecord::TopicConfig { topic, key, value }
            }
            StoredRecord::RemoveTopic { topic_id } => MetadataRecord::RemoveTopic { topic_id },
            StoredRecord::BrokerConfig { resource, key, value } => {
                MetadataRecord::BrokerConfig { resource, key, value }
            }
            StoredRecord::GroupConfig { group, key, value } => {
                MetadataRecord::GroupConfig { group, key, value }
            }
            StoredRecord::ClusterId { cluster_id } => MetadataRecord::ClusterId { cluster_id },
            StoredRecord::RegisterBroker { broker } => {
                MetadataRecord::RegisterBroker { broker: broker.into_registration().0 }
            }
            StoredRecord::FenceBroker { node } => {
                MetadataRecord::FenceBroker { node: NodeId(node) }
            }
            StoredRecord::UnfenceBroker { node } => {
                MetadataRecord::UnfenceBroker { node: NodeId(node) }
            }
            StoredRecord::RegisterController { node, directory_id } => {
                MetadataRecord::RegisterController { node: NodeId(node), directory_id }
            }
            StoredRecord::ProducerIds { node, next } => {
                MetadataRecord::ProducerIds { node: NodeId(node), next }
            }
            StoredRecord::PartitionChange { topic_id, partition, leader, leader_epoch, isr } => {
                MetadataRecord::PartitionChange {
                    topic_id,
                    partition: PartitionId(partition),
                    leader: NodeId(leader),
                    leader_epoch: LeaderEpoch(leader_epoch),
                    isr: isr.map(|isr| isr.into_iter().map(NodeId).collect()),
                }
            }
            stored @ StoredRecord::PartitionReplicas { .. } => partition_replicas(stored),
            StoredRecord::ScramCredential(stored) => MetadataRecord::ScramCredential {
                credential: stored.credential(),
                mechanism: stored.mechanism.into(),
                user: stored.user,
            },
            StoredRecord::RemoveScramCredential { user, mechanism } => {
                MetadataRecord::RemoveScramCredential { user, mechanism: mechanism.into() }
            }
            StoredRecord::ClientQuota { entity, key, value } => {
                MetadataRecord::ClientQuota { entity: entity_of(entity), key, value }
            }
            StoredRecord::Acl(stored) => {
                MetadataRecord::Acl { id: stored.id, binding: stored.binding() }
            }
            StoredRecord::RemoveAcl { id } => MetadataRecord::RemoveAcl { id },
        }
    }
}

/// A stored `PartitionReplicas` (any other record: unreachable, answered as the same
/// record would be by `From`).
fn partition_replicas(stored: StoredRecord) -> MetadataRecord {
    match stored {
        StoredRecord::PartitionReplicas {
            topic_id,
            partition,
            replicas,
            isr,
            adding,
            removing,
            leader,
            leader_epoch,
        } => MetadataRecord::PartitionReplicas {
            topic_id,
            partition: PartitionId(partition),
            replicas: nodes(replicas),
            isr: nodes(isr),
            adding: nodes(adding),
            removing: nodes(removing),
            leader: NodeId(leader),
            leader_epoch: LeaderEpoch(leader_epoch),
        },
        other => MetadataRecord::from(other),
    }
}

/// A list of records in its stored form, for `#[serde(into, from)]` on types that carry them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct StoredRecords(pub Vec<StoredRecord>);

impl From<Vec<MetadataRecord>> for StoredRecords {
    fn from(records: Vec<MetadataRecord>) -> Self {
        StoredRecords(records.iter().map(StoredRecord::from).collect())
    }
}

impl From<StoredRecords> for Vec<MetadataRecord> {
    fn from(records: StoredRecords) -> Self {
        records.0.into_iter().map(MetadataRecord::from).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::placement::PlacementPolicy;

    #[test]
    fn every_record_round_trips_and_an_unknown_type_is_refused() {
        let policy = PlacementPolicy { node: NodeId(2), shard_count: 2 };
        let records = vec![
            MetadataRecord::Topic { name: "t".into(), topic_id: [7; 16] },
            MetadataRecord::Partition {
                topic_id: [7; 16],
                partition: PartitionId(0),
                placement: policy.initial("t", 0),
            },
            MetadataRecord::TopicConfig {
                topic: "t".into(),
                key: "retention.ms".into(),
                value: Some("5".into()),
            },
            MetadataRecord::TopicConfig { topic: "t".into(), key: "x".into(), value: None },
            MetadataRecord::RemoveTopic { topic_id: [7; 16] },
            MetadataRecord::BrokerConfig { resource: "".into(), key: "k".into(), value: None },
            MetadataRecord::GroupConfig {
                group: "g".into(),
                key: "consumer.session.timeout.ms".into(),
                value: Some("50000".into()),
            },
            MetadataRecord::GroupConfig { group: "g".into(), key: "k".into(), value: None },
            MetadataRecord::ClusterId { cluster_id: "c".into() },
            MetadataRecord::FenceBroker { node: NodeId(3) },
            MetadataRecord::UnfenceBroker { node: NodeId(3) },
            MetadataRecord::RegisterController { node: NodeId(1), directory_id: "dir".into() },
            MetadataRecord::ProducerIds { node: NodeId(2), next: 2000 },
            MetadataRecord::PartitionChange {
                topic_id: [7; 16],
                partition: PartitionId(0),
                leader: NodeId(-1),
                leader_epoch: LeaderEpoch(4),
                isr: None,
            },
            MetadataRecord::PartitionChange {
                topic_id: [7; 16],
                partition: PartitionId(0),
                leader: NodeId(2),
                leader_epoch: LeaderEpoch(5),
                isr: Some(vec![NodeId(2), NodeId(3)]),
            },
            MetadataRecord::PartitionReplicas {
                topic_id: [7; 16],
                partition: PartitionId(0),
                replicas: vec![NodeId(3), NodeId(4), NodeId(2)],
                isr: vec![NodeId(2), NodeId(3)],
                adding: vec![NodeId(4)],
                removing: vec![NodeId(2)],
                leader: NodeId(2),
                leader_epoch: LeaderEpoch(5),
            },
            MetadataRecord::Partition {
                topic_id: [7; 16],
                partition: PartitionId(1),
                placement: Placement {
                    adding: vec![NodeId(5)],
                    removing: vec![NodeId(2)],
                    replicas: vec![NodeId(5), NodeId(2)],
                    ..policy.initial("t", 1)
                },
            },
            MetadataRecord::RegisterBroker {
                broker: BrokerRegistration {
                    node: NodeId(3),
                    incarnation: [9; 16],
                    directory_id: "d".into(),
                    host: "127.0.0.1".into(),
                    port: 9092,
                    rack: Some("r1".into()),
                    shards: 2,
                    listeners: vec![RegisteredListener {
                        name: "SASL_SSL".into(),
                        host: "broker-3".into(),
                        port: 9094,
                    }],
                },
            },
            MetadataRecord::ScramCredential {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha512,
                credential: ScramCredential {
                    salt: vec![1, 2],
                    stored_key: vec![3; 64],
                    server_key: vec![4; 64],
                    iterations: 8192,
                },
            },
            MetadataRecord::RemoveScramCredential {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha256,
            },
            MetadataRecord::ClientQuota {
                entity: QuotaEntity {
                    user: Some(Some("alice".into())),
                    client_id: Some(None),
                    ip: None,
                },
                key: "producer_byte_rate".into(),
                value: Some(QuotaValue(1048576.0)),
            },
            MetadataRecord::ClientQuota {
                entity: QuotaEntity { user: None, client_id: None, ip: Some(None) },
                key: "producer_byte_rate".into(),
                value: None,
            },
            MetadataRecord::Acl {
                id: [5; 16],
                binding: AclBinding {
                    resource_type: ResourceType::TransactionalId,
                    resource_name: "a-".into(),
                    pattern_type: PatternType::Prefixed,
                    principal: "User:alice".into(),
                    host: "*".into(),
                    operation: AclOperation::IdempotentWrite,
                    permission: Permission::Deny,
                },
            },
            MetadataRecord::RemoveAcl { id: [5; 16] },
        ];
        let json = serde_json::to_string(&StoredRecords::from(records.clone())).expect("encode");
        let back: StoredRecords = serde_json::from_str(&json).expect("decode");
        assert_eq!(Vec::<MetadataRecord>::from(back), records);
        // Records written before ISRs were stored still read: the leader alone in sync.
        let old = r#"[{"type": "partition", "topic_id": [7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7],
            "partition": 0, "placement": {"leader": -1, "shard": 1, "leader_epoch": 2,
            "replicas": [4, 5]}}]"#;
        let old: Vec<MetadataRecord> = serde_json::from_str::<StoredRecords>(old).unwrap().into();
        let MetadataRecord::Partition { placement, .. } = &old[0] else { panic!("{old:?}") };
        assert_eq!((placement.isr.clone(), placement.partition_epoch), (vec![NodeId(4)], 0));
        // ACLs are stored by names.
        let acl = &json[json.find(r#"{"type":"acl""#).expect("an acl record")..];
        assert!(acl.starts_with(
            r#"{"type":"acl","id":[5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5],"resource_type":"TRANSACTIONAL_ID","resource_name":"a-","pattern_type":"PREFIXED","principal":"User:alice","host":"*","operation":"IDEMPOTENT_WRITE","permission":"DENY"}"#
        ), "{acl}");
        let unknown = r#"[{"type": "fence_broker_v9", "broker": 1}]"#;
        let error = serde_json::from_str::<StoredRecords>(unknown).unwrap_err().to_string();
        assert!(error.contains("fence_broker_v9"), "{error}");
    }
}
