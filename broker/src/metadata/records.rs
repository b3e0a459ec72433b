//! Metadata records: every change to the cluster metadata is a sequence of these, applied in
//! order by `metadata::apply`. Modelled on KIP-631's records (TopicRecord, PartitionRecord,
//! ConfigRecord, RemoveTopicRecord) so that the controller's Raft log can carry them as they
//! are; later issues add broker registration, partition changes (ISR, leader), producer-id
//! blocks, ACLs and SCRAM credentials as new variants.
//! References: KIP-631 "The Quorum-based Kafka Controller", section "Record Formats".

use super::acl::{AclBinding, AclId};
use super::client_quota::{QuotaEntity, QuotaValue};
pub use super::image::BrokerRegistration;
use super::image::TopicId;
use super::placement::Placement;
use crate::sasl::scram::{ScramCredential, ScramMechanism};
use wire::ids::{LeaderEpoch, NodeId, PartitionId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRecord {
    /// A new topic with no partitions yet.
    Topic { name: String, topic_id: TopicId },
    /// A topic's next partition: `partition` must equal the topic's partition count.
    Partition { topic_id: TopicId, partition: PartitionId, placement: Placement },
    /// A topic config override set (`Some`) or removed (`None`).
    TopicConfig { topic: String, key: String, value: Option<String> },
    /// A topic and all its partitions and configs removed.
    RemoveTopic { topic_id: TopicId },
    /// A dynamic broker config (KIP-631's ConfigRecord for the BROKER resource) set (`Some`) or
    /// removed (`None`): `resource` is a node id, or empty for the cluster-wide default.
    BrokerConfig { resource: String, key: String, value: Option<String> },
    /// A group config (the GROUP config resource, KIP-848's ConfigRecord of resource type 32)
    /// set (`Some`) or removed (`None`). The group need not exist.
    GroupConfig { group: String, key: String, value: Option<String> },
    /// The cluster's id, set once by the first node to bootstrap a quorum (KIP-631 has it
    /// from `kafka-storage format`; strata's nodes agree on it through the log instead).
    ClusterId { cluster_id: String },
    /// A broker's registration (KIP-631's RegisterBrokerRecord): replaces an earlier one of
    /// the same node; a new broker is unfenced, a fenced one stays fenced until its
    /// heartbeats unfence it.
    RegisterBroker { broker: BrokerRegistration },
    /// A broker missed its heartbeats (KIP-631's FenceBrokerRecord): it leaves Metadata and
    /// leads nothing until unfenced.
    FenceBroker { node: NodeId },
    /// A fenced broker's heartbeats came back (UnfenceBrokerRecord).
    UnfenceBroker { node: NodeId },
    /// A controller-only voter's data directory (KIP-919's RegisterControllerRecord):
    /// replaces an earlier one of the same node. A voter that is also a broker is known by its
    /// broker registration.
    RegisterController { node: NodeId, directory_id: String },
    /// A block of producer ids given to a broker (KIP-730's ProducerIdsRecord): every id
    /// below `next` has been given out; `next` only grows.
    ProducerIds { node: NodeId, next: i64 },
    /// A partition's new leader and leader epoch, and its new ISR when `isr` is set
    /// (PartitionChangeRecord); -1 is no leader. Every change bumps the partition epoch.
    /// The leader must be -1 or in the ISR, the ISR non-empty and of the partition's
    /// replicas, and the leader epoch may not go back (grow it when the leader changes).
    PartitionChange {
        topic_id: TopicId,
        partition: PartitionId,
        leader: NodeId,
        leader_epoch: LeaderEpoch,
        isr: Option<Vec<NodeId>>,
    },
    /// A partition's replica set changes (KIP-455's reassignment, carried by Kafka's
    /// PartitionChangeRecord fields `replicas`, `addingReplicas`, `removingReplicas`): the
    /// replicas, ISR, adding and removing lists become these, and the leader and its epoch as
    /// in `PartitionChange`. `adding` and `removing` are of `replicas`, and disjoint.
    PartitionReplicas {
        topic_id: TopicId,
        partition: PartitionId,
        replicas: Vec<NodeId>,
        isr: Vec<NodeId>,
        adding: Vec<NodeId>,
        removing: Vec<NodeId>,
        leader: NodeId,
        leader_epoch: LeaderEpoch,
    },
    /// A user's SCRAM credential for a mechanism set, replacing an earlier one (KIP-554's
    /// UserScramCredentialRecord): the salt, StoredKey, ServerKey and iterations, never the
    /// password.
    ScramCredential { user: String, mechanism: ScramMechanism, credential: ScramCredential },
    /// A user's SCRAM credential for a mechanism removed (RemoveUserScramCredentialRecord).
    RemoveScramCredential { user: String, mechanism: ScramMechanism },
    /// A client quota set (`Some`) or removed (`None`) for an entity (KIP-546's
    /// ClientQuotaRecord).
    ClientQuota { entity: QuotaEntity, key: String, value: Option<QuotaValue> },
    /// An ACL added (KIP-801's AccessControlEntryRecord), under a new random id.
    Acl { id: AclId, binding: AclBinding },
    /// An ACL removed (RemoveAccessControlEntryRecord).
    RemoveAcl { id: AclId },
}
