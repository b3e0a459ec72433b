//! Partition verification (KIP-890 part 1, Kafka's `transaction.partition.verification.enable`,
//! on by default): the broker-side guard against hanging transactions.
//!
//! A transactional batch whose producer (id and epoch) has no transaction open on the
//! partition would open one. Before it is appended, the partition leader asks the producer's
//! transaction coordinator whether the partition is in the producer's ongoing transaction
//! (`TxnVerifier`: the coordinator's shard here, or AddPartitionsToTxn v4 `verify_only` to
//! another broker). A batch that is not (a produce request delayed past its transaction's
//! end, or a client that skipped AddPartitionsToTxn) is refused, so no transaction is opened
//! that no marker will ever close and the last stable offset never hangs.
//!
//! Kafka keeps a verification guard in the producer state so a marker written between the
//! answer and the append voids it. Here the check runs in the batch's turn of the partition's
//! append order (`order`), which markers take as well: no marker can come in between.
//! Later appends to the partition wait for the coordinator's answer, which is immediate (the
//! coordinator answers from memory) and bounded by `VERIFY_TIMEOUT`; only the first batch of a
//! transaction on a partition is verified.
//! Runs on: the partition's owner shard.

use super::{Partition, PartitionService};
use crate::error::{BrokerError, Result, VerifyError};
use futures_util::future::LocalBoxFuture;
use shard::io::Storage;
use std::time::Duration;
use wire::ids::TopicPartition;

/// How long a batch waits for its coordinator's answer (other appends to the partition wait
/// behind it): NOT_ENOUGH_REPLICAS after that, which producers retry.
pub const VERIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks a transactional id's coordinator whether `partition` is in the producer's ongoing
/// transaction (implemented by the node, which knows where the coordinator is).
pub trait TxnVerifier {
    fn verify(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partition: TopicPartition,
    ) -> LocalBoxFuture<'static, std::result::Result<(), VerifyError>>;
}

impl<S: Storage> PartitionService<S> {
    /// Where verification questions go; `None` turns verification off.
    pub fn set_txn_verifier(&self, verifier: Option<std::rc::Rc<dyn TxnVerifier>>) {
        *self.txn_verifier.borrow_mut() = verifier;
    }

    /// Verifies a produce request's batches for `partition` in their turn (see the module
    /// notes): nothing to do unless the first batch is transactional and its producer has no
    /// transaction open here.
    pub(super) async fn verify_batches(
        &self,
        partition: &TopicPartition,
        owned: &Partition<S>,
        transactional_id: Option<&str>,
        batches: &[wire::CheckedBatch],
    ) -> Result<()> {
        let (Some(transactional_id), Some(first)) = (transactional_id, batches.first()) else {
            return Ok(());
        };
        let header = first.header();
        if !header.is_transactional() {
            return Ok(());
        }
        let (producer_id, epoch) = (header.producer_id(), header.producer_epoch());
        self.verify_producer(partition, owned, transactional_id, producer_id, epoch).await
    }

    /// Verifies that `partition` is in the ongoing transaction of (`producer_id`, `epoch`)
    /// unless the producer already has a transaction open on it. The caller holds the
    /// partition's turn (or, for `__consumer_offsets`, the group coordinator's offsets lock,
    /// which its markers take too).
    pub async fn verify_producer(
        &self,
        partition: &TopicPartition,
        owned: &Partition<S>,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
    ) -> Result<()> {
        let Some(verifier) = self.txn_verifier.borrow().clone() else {
            return Ok(());
        };
        if owned.log.producer_in_transaction(producer_id, epoch) {
            return Ok(());
        }
        let asked =
            verifier.verify(transactional_id.to_string(), producer_id, epoch, partition.clone());
        let answer = futures_lite::future::or(asked, async {
            shard::runtime::sleep(VERIFY_TIMEOUT).await;
            Err(VerifyError::Unavailable(format!(
                "no answer from the coordinator of {transactional_id} in {VERIFY_TIMEOUT:?}"
            )))
        })
        .await;
        self.stats.txn_verification(answer.is_ok());
        answer.map_err(|error| {
            tracing::debug!(%partition, transactional_id, producer_id, epoch, %error,
                "a transactional batch failed partition verification");
            BrokerError::Verify(error)
        })
    }
}
