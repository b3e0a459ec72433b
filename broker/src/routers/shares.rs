//! The share router: a share partition's requests go to the shard that leads its topic
//! partition (`services::shares`).

use super::Placements;
use crate::error::{BrokerError, Result};
use crate::mesh::{Answers, Ask};
use crate::services::shares::ShareService;
use shard::io::Storage;
use std::marker::PhantomData;
use wire::ids::TopicPartition;

pub struct ShareRouter<S: Storage> {
    placements: Placements,
    storage: PhantomData<S>,
}

impl<S: Storage> ShareRouter<S> {
    pub fn new(placements: Placements) -> Self {
        ShareRouter { placements, storage: PhantomData }
    }

    /// A request for the share partitions of `partition` (led by this node).
    pub async fn call<R: Ask>(&self, partition: &TopicPartition, request: R) -> Result<R::Answer>
    where
        ShareService<S>: Answers<R>,
    {
        let owner = self.placements.owner(partition)?;
        Ok(self.placements.mesh.call::<ShareService<S>, R>(owner, request).await?)
    }

    /// The same request to every shard's share partitions.
    pub async fn call_all<R: Ask>(&self, request: impl Fn() -> R) -> Vec<Result<R::Answer>>
    where
        ShareService<S>: Answers<R>,
    {
        let answers = self.placements.mesh.call_all::<ShareService<S>, R>(request).await;
        answers.into_iter().map(|answer| answer.map_err(BrokerError::from)).collect()
    }
}
