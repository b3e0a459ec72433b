//! Routers: how a handler reaches the shard that owns what its request names, one per domain
//! (Redpanda's `partition_manager` / `group_router` shape): `partitions` (a partition's owner
//! shard, and transaction markers wherever the partition's leader is), `groups` (a group's
//! coordinator), `shares` (a share partition's leader shard, KIP-932), `transactions` (a transactional id's coordinator, and the partition leaders'
//! verification questions, KIP-890), `metadata` (changes and producer ids, decided on shard 0).
//! A handler goes handler → router → owning shard's service → log and back; services that ask
//! another domain (the transaction coordinator's markers, a partition's verification) hold that
//! domain's router, never the `Node`.
//! Owns: nothing but where things are (the node's id, its metadata view, its mesh end).
//! Runs on: every shard.

mod dead_letters;
mod groups;
mod metadata;
mod partitions;
pub mod share_state;
mod shares;
mod transactions;

pub use dead_letters::DeadLetterRouter;
pub use groups::GroupRouter;
pub use metadata::MetadataRouter;
pub use partitions::PartitionRouter;
pub use share_state::ShareStateRouter;
pub use shares::ShareRouter;
pub use transactions::TxnRouter;

use crate::error::{BrokerError, Result};
use crate::mesh::Mesh;
use crate::metadata::MetadataImage;
use crate::services::metadata::MetadataView;
use shard::runtime::ShardId;
use std::rc::Rc;
use wire::ids::{NodeId, TopicPartition};

/// Where partitions live, as this node's metadata view says.
#[derive(Clone)]
pub struct Placements {
    node: NodeId,
    view: Rc<MetadataView>,
    mesh: Rc<Mesh>,
}

impl Placements {
    pub fn new(node: NodeId, view: Rc<MetadataView>, mesh: Rc<Mesh>) -> Self {
        Placements { node, view, mesh }
    }

    pub fn image(&self) -> Rc<MetadataImage> {
        self.view.current()
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The shard that owns `partition`, from its placement: it must be led by this node.
    pub fn owner(&self, partition: &TopicPartition) -> Result<ShardId> {
        let image = self.image();
        let placement = image
            .placement(partition)
            .ok_or_else(|| BrokerError::UnknownTopicOrPartition(partition.to_string()))?;
        if placement.leader != self.node {
            return Err(BrokerError::NotLeader(partition.to_string()));
        }
        Ok(placement.shard)
    }

    /// A live broker's (host, port), from the image (another broker a request is passed on to;
    /// a single node passes nothing on).
    pub fn endpoint(&self, node: NodeId) -> Option<(String, u16)> {
        let image = self.image();
        let broker = image.live_brokers().find(|broker| broker.node == node)?;
        Some((broker.host.clone(), broker.port))
    }
}
