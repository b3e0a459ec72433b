//! The transaction router: a transactional id's requests go to its coordinator, the shard that
//! owns its `__transaction_state` partition; a partition leader's verification question
//! (KIP-890 part 1) goes there, or to the broker leading that partition.

use super::Placements;
use crate::error::{error_code, BrokerError, Result, TxnError, VerifyError};
use crate::mesh::{Answers, Ask};
use crate::metadata::internal::{partition_for_transactional_id, TRANSACTION_STATE_TOPIC};
use crate::services::partitions::txn_verify::TxnVerifier;
use crate::services::transactions::requests::Verify;
use crate::services::transactions::TransactionService;
use futures_util::future::LocalBoxFuture;
use shard::io::Storage;
use shard::runtime::ShardId;
use std::marker::PhantomData;
use std::rc::Rc;
use wire::ids::TopicPartition;

pub struct TxnRouter<S: Storage> {
    placements: Placements,
    storage: PhantomData<S>,
}

fn state_partition(transactional_id: &str) -> TopicPartition {
    TopicPartition::new(TRANSACTION_STATE_TOPIC, partition_for_transactional_id(transactional_id))
}

impl<S: Storage> TxnRouter<S> {
    pub fn new(placements: Placements) -> Self {
        TxnRouter { placements, storage: PhantomData }
    }

    /// The shard coordinating `transactional_id` (the owner of its `__transaction_state`
    /// partition).
    pub fn coordinator(&self, transactional_id: &str) -> Result<ShardId> {
        self.placements.owner(&state_partition(transactional_id)).map_err(|error| match error {
            BrokerError::NotLeader(_) => BrokerError::Txn(TxnError::NotCoordinator),
            _ => BrokerError::Txn(TxnError::CoordinatorNotAvailable),
        })
    }

    /// A request for `transactional_id`'s coordinator.
    pub async fn call<R: Ask>(&self, transactional_id: &str, request: R) -> Result<R::Answer>
    where
        TransactionService<S>: Answers<R>,
    {
        let coordinator = self.coordinator(transactional_id)?;
        let mesh = &self.placements.mesh;
        Ok(mesh.call::<TransactionService<S>, R>(coordinator, request).await?)
    }

    /// The same request to every shard's transaction coordinator.
    pub async fn call_all<R: Ask>(&self, request: impl Fn() -> R) -> Vec<Result<R::Answer>>
    where
        TransactionService<S>: Answers<R>,
    {
        let answers = self.placements.mesh.call_all::<TransactionService<S>, R>(request).await;
        answers.into_iter().map(|answer| answer.map_err(BrokerError::from)).collect()
    }

    /// Partition verification (KIP-890 part 1): asks the coordinator of `transactional_id`
    /// (a shard of this node, or another broker with AddPartitionsToTxn v4 `verify_only`)
    /// whether `partition` is in the producer's ongoing transaction.
    pub async fn verify_in_transaction(
        &self,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        partition: &TopicPartition,
    ) -> std::result::Result<(), VerifyError> {
        let state = state_partition(transactional_id);
        // Kafka: no __transaction_state (or no leader for it) is COORDINATOR_NOT_AVAILABLE.
        let unavailable =
            || VerifyError::Unavailable(format!("{state} has no leader for {transactional_id}"));
        let leader = self.placements.image().placement(&state).ok_or_else(unavailable)?.leader;
        if leader == self.placements.node() {
            let partitions = vec![partition.clone()];
            let id = transactional_id.to_string();
            let request = Verify { transactional_id: id, producer_id, producer_epoch, partitions };
            let verified = self.call(transactional_id, request).await;
            let refusal = match verified.and_then(|verified| verified) {
                Ok(verified) if verified == [true] => None,
                Ok(_) => Some(VerifyError::NotInTransaction),
                Err(error) => VerifyError::from_coordinator_code(error_code(&error)),
            };
            return refusal.map_or(Ok(()), Err);
        }
        let (host, port) = self.placements.endpoint(leader).ok_or_else(unavailable)?;
        let code = crate::services::transactions::remote::verify_partition(
            &host,
            port,
            transactional_id,
            producer_id,
            producer_epoch,
            partition,
        )
        .await
        .map_err(VerifyError::Unavailable)?;
        VerifyError::from_coordinator_code(code).map_or(Ok(()), Err)
    }
}

/// The partitions' verification questions go through the transaction router.
impl<S: Storage> TxnVerifier for Rc<TxnRouter<S>> {
    fn verify(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partition: TopicPartition,
    ) -> LocalBoxFuture<'static, std::result::Result<(), VerifyError>> {
        let router = self.clone();
        Box::pin(async move {
            let producer = (producer_id, producer_epoch);
            router.verify_in_transaction(&transactional_id, producer, &partition).await
        })
    }
}
