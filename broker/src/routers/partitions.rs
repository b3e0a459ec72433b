//! The partition router: requests for a partition go to the shard that owns it; transaction
//! markers go wherever the partition's leader is (a shard here, or another broker).

use super::Placements;
use crate::error::{BrokerError, Result};
use crate::mesh::{Answers, Ask, Call};
use crate::metadata::internal::OFFSETS_TOPIC;
use crate::services::groups::{requests::TxnMarker, GroupService};
use crate::services::partitions::txn_markers::MarkerSpec;
use crate::services::partitions::waits::{PartitionWaits, WaitForAppend};
use crate::services::partitions::{requests, PartitionService};
use crate::services::transactions::{MarkerFailure, MarkerWriter};
use futures_util::future::LocalBoxFuture;
use shard::io::Storage;
use shard::runtime::ShardId;
use std::marker::PhantomData;
use std::rc::Rc;
use wire::ids::{Offset, TopicPartition};

pub struct PartitionRouter<S: Storage> {
    placements: Placements,
    storage: PhantomData<S>,
}

impl<S: Storage> PartitionRouter<S> {
    pub fn new(placements: Placements) -> Self {
        PartitionRouter { placements, storage: PhantomData }
    }

    /// The shard that owns `partition` (led by this node).
    pub fn owner(&self, partition: &TopicPartition) -> Result<ShardId> {
        self.placements.owner(partition)
    }

    /// A request for `partition`'s owner.
    pub async fn call<R: Ask>(&self, partition: &TopicPartition, request: R) -> Result<R::Answer>
    where
        PartitionService<S>: Answers<R>,
    {
        let owner = self.owner(partition)?;
        Ok(self.placements.mesh.call::<PartitionService<S>, R>(owner, request).await?)
    }

    /// Starts `request` on shard `owner`'s partition service (`Mesh::start_call`): returns once
    /// it is queued there, with the answer to await.
    pub async fn start<R: Ask>(
        &self,
        owner: ShardId,
        request: R,
    ) -> std::result::Result<Call<R::Answer>, crate::error::MeshError>
    where
        PartitionService<S>: Answers<R>,
    {
        self.placements.mesh.start_call::<PartitionService<S>, R>(owner, request).await
    }

    /// The same request to every shard's partition service.
    pub async fn call_all<R: Ask>(&self, request: impl Fn() -> R) -> Vec<Result<R::Answer>>
    where
        PartitionService<S>: Answers<R>,
    {
        let answers = self.placements.mesh.call_all::<PartitionService<S>, R>(request).await;
        answers.into_iter().map(|answer| answer.map_err(BrokerError::from)).collect()
    }

    /// Waits (at most `wait_ms`) on `partition`'s owner for an append past `offset`.
    /// With `log_end` (a follower's fetch) it waits for the log end, else the high watermark.
    pub async fn wait_for_append(
        &self,
        partition: &TopicPartition,
        offset: Offset,
        wait_ms: u64,
        log_end: bool,
    ) {
        let Ok(owner) = self.owner(partition) else { return };
        let request = WaitForAppend { partition: partition.clone(), offset, wait_ms, log_end };
        let _ = self.placements.mesh.call::<PartitionWaits<S>, _>(owner, request).await;
    }

    /// Writes a transaction marker on `partition`, led by this node: through the group
    /// coordinator for an `__consumer_offsets` partition (its transactional offsets become
    /// visible or go), else on the partition's owner shard.
    pub async fn write_marker_here(
        &self,
        partition: &TopicPartition,
        marker: MarkerSpec,
    ) -> Result<()> {
        let owner = self.owner(partition)?;
        let mesh = &self.placements.mesh;
        if partition.topic == OFFSETS_TOPIC {
            let request = TxnMarker { partition: partition.clone(), marker };
            return mesh.call::<GroupService<S>, _>(owner, request).await?;
        }
        let request = requests::WriteMarker { partition: partition.clone(), marker };
        mesh.call::<PartitionService<S>, _>(owner, request).await?
    }

    /// Writes a transaction marker on the leader of `partition`: a shard of this node, or
    /// another broker (WriteTxnMarkers).
    pub async fn write_marker(
        &self,
        partition: &TopicPartition,
        marker: MarkerSpec,
    ) -> std::result::Result<(), MarkerFailure> {
        let image = self.placements.image();
        let Some(placement) = image.placement(partition) else {
            return Err(MarkerFailure::GiveUp(format!("{partition} no longer exists")));
        };
        if placement.leader != self.placements.node() {
            let Some((host, port)) = self.placements.endpoint(placement.leader) else {
                return Err(MarkerFailure::Retry(format!("{partition}: its leader is not known")));
            };
            let remote = crate::services::transactions::remote::write_marker;
            return remote(&host, port, partition, marker).await;
        }
        self.write_marker_here(partition, marker)
            .await
            .map_err(|error| classify_marker_error(partition, &error))
    }
}

/// Whether a marker that failed on this broker is sent again: not when the producer or the
/// coordinator was fenced, or the partition is gone.
fn classify_marker_error(partition: &TopicPartition, error: &BrokerError) -> MarkerFailure {
    let why = format!("{partition}: {error}");
    match error {
        BrokerError::Storage(shard::StorageError::InvalidProducerEpoch { .. })
        | BrokerError::Storage(shard::StorageError::TransactionCoordinatorFenced { .. })
        | BrokerError::UnknownTopicOrPartition(_) => MarkerFailure::GiveUp(why),
        _ => MarkerFailure::Retry(why),
    }
}

/// The transaction coordinator writes its markers through the partition router.
impl<S: Storage> MarkerWriter for Rc<PartitionRouter<S>> {
    fn write_marker(
        &self,
        partition: TopicPartition,
        marker: MarkerSpec,
    ) -> LocalBoxFuture<'static, std::result::Result<(), MarkerFailure>> {
        let router = self.clone();
        Box::pin(async move { PartitionRouter::write_marker(&router, &partition, marker).await })
    }
}
