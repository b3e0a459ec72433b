//! The transaction coordinator's requests, each with the type of its answer (`mesh::Ask`),
//! and how the service answers them (`mesh::Answers`). Every answer first follows a
//! leadership change since the last request (`follow_leadership`).

use super::{describe, DescribedTxn, TransactionService, TxnState};
use crate::error::{BrokerError, Result, TxnError};
use crate::mesh::{answers, Ask};
use wire::ids::TopicPartition;

/// InitProducerId for a transactional id.
pub struct InitProducerId {
    pub transactional_id: String,
    pub timeout_ms: i32,
    /// KIP-360: the producer's current (id, epoch), when it sends them.
    pub expected: Option<(i64, i16)>,
}

impl Ask for InitProducerId {
    /// The producer id and epoch.
    type Answer = Result<(i64, i16)>;
}

answers!(TransactionService, InitProducerId, |service, init| {
    service.follow_leadership().await;
    service.init_producer_id(&init.transactional_id, init.timeout_ms, init.expected).await
});

/// AddPartitionsToTxn (and AddOffsetsToTxn's group partition).
pub struct AddPartitions {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
}

impl Ask for AddPartitions {
    type Answer = Result<()>;
}

answers!(TransactionService, AddPartitions, |service, add| {
    service.follow_leadership().await;
    let (id, epoch) = (add.producer_id, add.producer_epoch);
    service.add_partitions(&add.transactional_id, id, epoch, &add.partitions).await
});

/// EndTxn: commit or abort.
pub struct EndTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
}

impl Ask for EndTxn {
    type Answer = Result<()>;
}

answers!(TransactionService, EndTxn, |service, end| {
    service.follow_leadership().await;
    let (id, epoch) = (end.producer_id, end.producer_epoch);
    service.end_txn(&end.transactional_id, id, epoch, end.commit).await
});

/// Partition verification (KIP-890 part 1): whether each partition is in the producer's
/// ongoing transaction, asked by a partition leader before it takes the first transactional
/// batch of a transaction. Nothing is written.
pub struct Verify {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
}

impl Ask for Verify {
    /// Per partition, in the request's order: in the ongoing transaction or not.
    type Answer = Result<Vec<bool>>;
}

answers!(TransactionService, Verify, |service, verify| {
    service.follow_leadership().await;
    let (id, epoch) = (verify.producer_id, verify.producer_epoch);
    service.verify(&verify.transactional_id, id, epoch, &verify.partitions)
});

/// Every transactional id this shard coordinates (ListTransactions, `strata txn list`).
pub struct List;

impl Ask for List {
    type Answer = Vec<DescribedTxn>;
}

answers!(TransactionService, List, |service, _list| {
    service.follow_leadership().await;
    let mut listed: Vec<DescribedTxn> =
        service.txns.borrow().iter().map(|(id, cell)| describe(id, &cell.metadata)).collect();
    listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    listed
});

/// DescribeTransactions, for one id.
pub struct Describe {
    pub transactional_id: String,
}

impl Ask for Describe {
    type Answer = Result<DescribedTxn>;
}

answers!(TransactionService, Describe, |service, asked| {
    service.follow_leadership().await;
    let id = &asked.transactional_id;
    service.check_coordinator(id).and_then(|()| {
        service
            .txns
            .borrow()
            .get(id)
            .filter(|cell| cell.metadata.state != TxnState::Dead)
            .map(|cell| describe(id, &cell.metadata))
            .ok_or(BrokerError::Txn(TxnError::TransactionalIdNotFound))
    })
});
