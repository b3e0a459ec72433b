//! The group router: a group's requests go to its coordinator, the shard that owns the group's
//! `__consumer_offsets` partition.

use super::Placements;
use crate::error::{BrokerError, GroupError, Result};
use crate::mesh::{Answers, Ask};
use crate::metadata::internal::{partition_for_group, OFFSETS_TOPIC};
use crate::services::groups::GroupService;
use shard::io::Storage;
use shard::runtime::ShardId;
use std::marker::PhantomData;
use wire::ids::TopicPartition;

pub struct GroupRouter<S: Storage> {
    placements: Placements,
    storage: PhantomData<S>,
}

impl<S: Storage> GroupRouter<S> {
    pub fn new(placements: Placements) -> Self {
        GroupRouter { placements, storage: PhantomData }
    }

    /// The shard coordinating `group` (the owner of its `__consumer_offsets` partition).
    pub fn coordinator(&self, group: &str) -> Result<ShardId> {
        let partition = TopicPartition::new(OFFSETS_TOPIC, partition_for_group(group));
        self.placements.owner(&partition).map_err(|error| match error {
            BrokerError::NotLeader(_) => BrokerError::Group(GroupError::NotCoordinator),
            _ => BrokerError::Group(GroupError::CoordinatorNotAvailable),
        })
    }

    /// A request for `group`'s coordinator.
    pub async fn call<R: Ask>(&self, group: &str, request: R) -> Result<R::Answer>
    where
        GroupService<S>: Answers<R>,
    {
        let coordinator = self.coordinator(group)?;
        Ok(self.placements.mesh.call::<GroupService<S>, R>(coordinator, request).await?)
    }

    /// The same request to every shard's group coordinator.
    pub async fn call_all<R: Ask>(&self, request: impl Fn() -> R) -> Vec<Result<R::Answer>>
    where
        GroupService<S>: Answers<R>,
    {
        let answers = self.placements.mesh.call_all::<GroupService<S>, R>(request).await;
        answers.into_iter().map(|answer| answer.map_err(BrokerError::from)).collect()
    }
}
