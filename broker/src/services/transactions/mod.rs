//! The transaction coordinator service (KIP-98, transaction version 1).
//!
//! Owns, on the shard that leads a transactional id's `__transaction_state` partition
//! (`abs(javaHash(id)) % 50`, `metadata::internal::partition_for_transactional_id`), the id's
//! state (`state_machine`) and its durable records in that partition (`stored`), replayed when
//! the shard takes the partition (`follow_leadership`). EndTxn and fencing write the markers
//! through a `MarkerWriter` (this shard, another shard, or another broker: `remote`).
//! Invariants: every transition is appended to `__transaction_state` (synced, and committed
//! by the in-sync replicas where it is replicated) before it is applied and answered; while
//! an id's transition or markers are in progress, other requests for it are answered
//! CONCURRENT_TRANSACTIONS; a transaction found in PrepareCommit/PrepareAbort (after a restart
//! or a coordinator move) has its markers written again. Errors are typed (`TxnError`).
//! Runs on: every shard, for the transactional ids it coordinates.

pub mod remote;
pub mod requests;
pub mod state_machine;
pub mod stored;

use crate::clock::Clock;
use crate::error::{BrokerError, Result, TxnError};
use crate::mesh::{Mesh, Service};
use crate::metadata::internal::{partition_for_transactional_id, TRANSACTION_STATE_TOPIC};
use crate::services::metadata::METADATA_SHARD;
use crate::services::partitions::txn_markers::MarkerSpec;
use crate::services::partitions::PartitionService;
use crate::services::producer_ids::{InitProducerId, ProducerIdService};
use bytes::BytesMut;
use futures_util::future::LocalBoxFuture;
use shard::io::Storage;
use state_machine::{EndStep, InitStep, TxnMetadata, TxnState};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::time::{Duration, Instant};
use wire::ids::TopicPartition;

/// How long EndTxn waits for its markers before answering (the decision is durable: markers
/// not written by then are written in the background).
const MARKERS_INLINE_WAIT: Duration = Duration::from_secs(10);
/// Pause between rounds of marker writes that failed.
const MARKER_RETRY_MS: u64 = 100;
const MARKER_RETRY_MS_MAX: u64 = 2000;
/// How long a transition waits for the in-sync replicas of `__transaction_state`.
const STATE_REPLICATION_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes read at a time when replaying a `__transaction_state` partition.
const REPLAY_READ_BYTES: usize = 1 << 20;
/// A fault-test hook: the coordinator waits this long (milliseconds) between a durable
/// PrepareCommit/PrepareAbort and its markers, so a test can kill the broker in between.
pub const MARKER_DELAY_ENV: &str = "STRATA_TEST_TXN_MARKER_DELAY_MS";
/// Transactional ids one shard coordinates at most (each holds its partition set).
pub const TRANSACTIONAL_IDS_PER_SHARD_MAX: usize = 1_000_000;

/// Why a marker was not written: try again later, or never (fenced producer or coordinator,
/// deleted partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerFailure {
    Retry(String),
    GiveUp(String),
}

/// Writes one marker to a partition's leader, wherever it is (implemented by the node, which
/// knows the placement and the brokers).
pub trait MarkerWriter {
    fn write_marker(
        &self,
        partition: TopicPartition,
        marker: MarkerSpec,
    ) -> LocalBoxFuture<'static, std::result::Result<(), MarkerFailure>>;
}

/// The coordinator's settings.
#[derive(Debug, Clone, Copy)]
pub struct TxnConfig {
    /// Kafka's `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_interval_ms: u64,
    /// Kafka's `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
    /// Kafka's `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub expiry_interval_ms: i64,
}

/// A transactional id as DescribeTransactions and ListTransactions show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedTxn {
    pub transactional_id: String,
    pub state: &'static str,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub partitions: Vec<TopicPartition>,
}

/// Who clears an id's pending flag after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// The request, once answered.
    Release,
    /// A background task finishing the transaction's markers.
    HandedOff,
}

struct TxnCell {
    metadata: TxnMetadata,
    /// A transition or its markers are in progress.
    pending: bool,
}

pub struct TransactionService<S: Storage> {
    partitions: Rc<PartitionService<S>>,
    stats: Rc<crate::stats::ShardStats>,
    /// How long completed transactions were open (first AddPartitions to Complete), µs.
    durations_us: RefCell<hdrhistogram::Histogram<u64>>,
    mesh: Rc<Mesh>,
    clock: Clock,
    config: TxnConfig,
    txns: RefCell<HashMap<String, TxnCell>>,
    /// The `__transaction_state` partitions whose ids are loaded here.
    loaded: RefCell<HashSet<TopicPartition>>,
    roles_seen: Cell<Option<u64>>,
    markers: RefCell<Option<Rc<dyn MarkerWriter>>>,
    /// `MARKER_DELAY_ENV` (zero unless a fault test sets it).
    marker_delay: Duration,
}

fn state_partition(transactional_id: &str) -> TopicPartition {
    TopicPartition::new(TRANSACTION_STATE_TOPIC, partition_for_transactional_id(transactional_id))
}

fn describe(transactional_id: &str, metadata: &TxnMetadata) -> DescribedTxn {
    DescribedTxn {
        transactional_id: transactional_id.to_string(),
        state: metadata.state.name(),
        producer_id: metadata.producer_id,
        producer_epoch: metadata.producer_epoch,
        timeout_ms: metadata.timeout_ms,
        start_ms: metadata.start_ms,
        partitions: metadata.partitions.iter().cloned().collect(),
    }
}

impl<S: Storage> TransactionService<S> {
    pub fn new(
        partitions: Rc<PartitionService<S>>,
        stats: Rc<crate::stats::ShardStats>,
        mesh: Rc<Mesh>,
        clock: Clock,
        config: TxnConfig,
    ) -> Self {
        TransactionService {
            partitions,
            stats,
            durations_us: RefCell::new(shard::partition_log::latency_histogram()),
            mesh,
            clock,
            config,
            txns: RefCell::default(),
            loaded: RefCell::default(),
            roles_seen: Cell::new(None),
            markers: RefCell::new(None),
            marker_delay: std::env::var(MARKER_DELAY_ENV)
                .ok()
                .and_then(|ms| ms.parse().ok())
                .map_or(Duration::ZERO, Duration::from_millis),
        }
    }

    /// Where markers go (set once the node exists).
    pub fn set_marker_writer(&self, writer: Rc<dyn MarkerWriter>) {
        *self.markers.borrow_mut() = Some(writer);
    }

    /// How long this shard's completed transactions were open, microseconds.
    pub fn durations_us(&self) -> hdrhistogram::Histogram<u64> {
        self.durations_us.borrow().clone()
    }

    /// Open transactions this shard coordinates (for `/metrics`).
    pub fn open_transactions(&self) -> usize {
        self.txns
            .borrow()
            .values()
            .filter(|cell| {
                matches!(
                    cell.metadata.state,
                    TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
                )
            })
            .count()
    }

    /// This shard leads the id's `__transaction_state` partition and has loaded it.
    fn check_coordinator(&self, transactional_id: &str) -> Result<()> {
        let partition = state_partition(transactional_id);
        if self.partitions.local(&partition).is_none() {
            return Err(BrokerError::Txn(TxnError::NotCoordinator));
        }
        if !self.loaded.borrow().contains(&partition) {
            return Err(BrokerError::Txn(TxnError::CoordinatorNotAvailable));
        }
        Ok(())
    }

    /// Partition verification: answered from the id's metadata as it stands. A partition not
    /// in it while a transition is in progress (an AddPartitionsToTxn being written) is
    /// CONCURRENT_TRANSACTIONS, retried by the producer; one already in the Ongoing
    /// transaction stays in it until the markers, which wait for the batch being verified
    /// (they take their turn in the partition's append order).
    fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<bool>> {
        self.check_coordinator(transactional_id)?;
        let txns = self.txns.borrow();
        let cell = txns
            .get(transactional_id)
            .ok_or(BrokerError::Txn(TxnError::InvalidProducerIdMapping))?;
        let verified = state_machine::verify_partitions(
            &cell.metadata,
            producer_id,
            producer_epoch,
            partitions,
        )
        .map_err(BrokerError::Txn)?;
        if cell.pending && verified.contains(&false) {
            return Err(BrokerError::Txn(TxnError::ConcurrentTransactions));
        }
        Ok(verified)
    }

    /// The id's metadata, marked pending; CONCURRENT_TRANSACTIONS if it already is.
    fn take(&self, transactional_id: &str) -> Result<Option<TxnMetadata>> {
        let mut txns = self.txns.borrow_mut();
        match txns.get_mut(transactional_id) {
            None => Ok(None),
            Some(cell) if cell.pending => Err(BrokerError::Txn(TxnError::ConcurrentTransactions)),
            Some(cell) => {
                cell.pending = true;
                Ok(Some(cell.metadata.clone()))
            }
        }
    }

    fn release(&self, transactional_id: &str) {
        if let Some(cell) = self.txns.borrow_mut().get_mut(transactional_id) {
            cell.pending = false;
        }
    }

    /// Appends `metadata` as the id's record (durably), then applies it (still pending).
    /// Invariant: the id moves only along the state machine's legal transitions (a new id
    /// starts Empty); asserted before anything is written.
    async fn write(&self, transactional_id: &str, metadata: &TxnMetadata) -> Result<()> {
        let previous = self.txns.borrow().get(transactional_id).map(|cell| cell.metadata.state);
        let next = metadata.state;
        assert!(
            previous.map_or(next == TxnState::Empty, |state| state.may_become(next)),
            "transaction {transactional_id}: illegal transition {previous:?} -> {next:?}"
        );
        self.append_record(transactional_id, Some(metadata)).await?;
        let mut txns = self.txns.borrow_mut();
        match txns.get_mut(transactional_id) {
            Some(cell) => cell.metadata = metadata.clone(),
            None => {
                txns.insert(
                    transactional_id.to_string(),
                    TxnCell { metadata: metadata.clone(), pending: true },
                );
            }
        }
        Ok(())
    }

    /// Appends the id's record (a tombstone for `None`) to its `__transaction_state`
    /// partition: synced, and committed by the in-sync replicas where it is replicated.
    async fn append_record(
        &self,
        transactional_id: &str,
        metadata: Option<&TxnMetadata>,
    ) -> Result<()> {
        let partition = state_partition(transactional_id);
        let owned =
            self.partitions.local(&partition).ok_or(BrokerError::Txn(TxnError::NotCoordinator))?;
        let now = self.clock.now_ms();
        let key = stored::key(transactional_id);
        let value = metadata.map(stored::value);
        let mut builder = wire::RecordBatchBuilder::new(now);
        builder.push(wire::BatchRecord {
            key: Some(&key),
            value: value.as_deref(),
            timestamp_delta: 0,
        });
        let batch = BytesMut::from(&builder.build()[..]);
        let me = self.partitions.node();
        match owned.append_committed(&partition, me, batch, now, STATE_REPLICATION_TIMEOUT).await {
            Ok(_) => Ok(()),
            Err(BrokerError::NotLeader(_)) => Err(BrokerError::Txn(TxnError::NotCoordinator)),
            Err(error) => {
                tracing::warn!(%partition, %error, "writing a transaction record failed");
                Err(BrokerError::Txn(TxnError::CoordinatorNotAvailable))
            }
        }
    }

    /// The coordinator epoch of the id's partition (its leader epoch).
    fn coordinator_epoch(&self, transactional_id: &str) -> i32 {
        self.partitions
            .local(&state_partition(transactional_id))
            .map_or(-1, |owned| owned.leader_epoch())
    }

    async fn new_producer_id(&self) -> Result<i64> {
        let request = InitProducerId { producer_id: -1, epoch: -1 };
        let (producer_id, _) =
            self.mesh.call::<ProducerIdService<S>, _>(METADATA_SHARD, request).await??;
        Ok(producer_id)
    }

    async fn init_producer_id(
        self: &Rc<Self>,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16)> {
        self.check_coordinator(transactional_id)?;
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(BrokerError::Txn(TxnError::InvalidTransactionTimeout(timeout_ms)));
        }
        let now = self.clock.now_ms();
        let Some(current) = self.take(transactional_id)? else {
            if self.txns.borrow().len() >= TRANSACTIONAL_IDS_PER_SHARD_MAX {
                return Err(BrokerError::Txn(TxnError::CoordinatorNotAvailable));
            }
            let producer_id = self.new_producer_id().await?;
            let metadata = TxnMetadata::new(producer_id, 0, timeout_ms, now);
            if self.txns.borrow().contains_key(transactional_id) {
                return Err(BrokerError::Txn(TxnError::ConcurrentTransactions));
            }
            let written = self.write(transactional_id, &metadata).await;
            self.release(transactional_id);
            written?;
            return Ok((producer_id, 0));
        };
        let (result, pending) =
            self.init_existing(transactional_id, &current, timeout_ms, expected).await;
        if pending == Pending::Release {
            self.release(transactional_id);
        }
        result
    }

    /// InitProducerId for a known id (it is pending); whether the caller releases it (not when
    /// the fenced transaction's markers were handed to a background task, which does).
    async fn init_existing(
        self: &Rc<Self>,
        transactional_id: &str,
        current: &TxnMetadata,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> (Result<(i64, i16)>, Pending) {
        let now = self.clock.now_ms();
        let step = match state_machine::init_producer_id(current, timeout_ms, expected, now) {
            Ok(step) => step,
            Err(error) => return (Err(BrokerError::Txn(error)), Pending::Release),
        };
        let next = match step {
            InitStep::Answer(producer_id, epoch) => {
                return (Ok((producer_id, epoch)), Pending::Release)
            }
            InitStep::Write(next) => next,
            InitStep::NewProducerId => {
                let producer_id = match self.new_producer_id().await {
                    Ok(producer_id) => producer_id,
                    Err(error) => return (Err(error), Pending::Release),
                };
                let mut next = TxnMetadata::new(producer_id, 0, timeout_ms, now);
                next.last_producer_epoch = -1;
                next
            }
            InitStep::Fence(prepare_abort) => {
                // The open transaction is aborted with a bumped epoch, whose markers fence
                // the old producer on every partition.
                tracing::info!(
                    transactional_id,
                    producer_id = prepare_abort.producer_id,
                    epoch = prepare_abort.producer_epoch,
                    "fencing the open transaction of a re-initialised transactional id"
                );
                if let Err(error) = self.write(transactional_id, &prepare_abort).await {
                    return (Err(error), Pending::Release);
                }
                if !self
                    .write_markers(transactional_id, Some(Instant::now() + MARKERS_INLINE_WAIT))
                    .await
                {
                    // The id stays pending until the background task has written them.
                    self.finish_in_background(transactional_id);
                    let retry = Err(BrokerError::Txn(TxnError::ConcurrentTransactions));
                    return (retry, Pending::HandedOff);
                }
                let completed =
                    self.txns.borrow().get(transactional_id).map(|c| c.metadata.clone());
                let Some(completed) = completed.filter(|_| expected.is_none()) else {
                    let retry = Err(BrokerError::Txn(TxnError::ConcurrentTransactions));
                    return (retry, Pending::Release);
                };
                return Box::pin(self.init_existing(
                    transactional_id,
                    &completed,
                    timeout_ms,
                    None,
                ))
                .await;
            }
        };
        let written = self.write(transactional_id, &next).await;
        (written.map(|()| (next.producer_id, next.producer_epoch)), Pending::Release)
    }

    async fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<()> {
        self.check_coordinator(transactional_id)?;
        let Some(current) = self.take(transactional_id)? else {
            return Err(BrokerError::Txn(TxnError::InvalidProducerIdMapping));
        };
        let now = self.clock.now_ms();
        let result = match state_machine::add_partitions(
            &current,
            producer_id,
            producer_epoch,
            partitions,
            now,
        ) {
            Err(error) => Err(BrokerError::Txn(error)),
            Ok(None) => Ok(()),
            Ok(Some(next)) => self.write(transactional_id, &next).await,
        };
        self.release(transactional_id);
        result
    }

    async fn end_txn(
        self: &Rc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<()> {
        self.check_coordinator(transactional_id)?;
        let Some(current) = self.take(transactional_id)? else {
            return Err(BrokerError::Txn(TxnError::InvalidProducerIdMapping));
        };
        let now = self.clock.now_ms();
        let prepare = match state_machine::end_transaction(
            &current,
            producer_id,
            producer_epoch,
            commit,
            now,
        ) {
            Ok(EndStep::Prepare(prepare)) => prepare,
            Ok(EndStep::Done) => {
                self.release(transactional_id);
                return Ok(());
            }
            Err(error) => {
                self.release(transactional_id);
                return Err(BrokerError::Txn(error));
            }
        };
        if let Err(error) = self.write(transactional_id, &prepare).await {
            self.release(transactional_id);
            return Err(error);
        }
        if !self.marker_delay.is_zero() {
            tracing::warn!(
                transactional_id,
                state = prepare.state.name(),
                delay_ms = self.marker_delay.as_millis() as u64,
                "transaction prepared; markers delayed ({MARKER_DELAY_ENV})"
            );
            shard::runtime::sleep(self.marker_delay).await;
        }
        // Decided: the answer is a success whether or not every marker is written yet.
        if self.write_markers(transactional_id, Some(Instant::now() + MARKERS_INLINE_WAIT)).await {
            self.release(transactional_id);
        } else {
            self.finish_in_background(transactional_id);
        }
        Ok(())
    }

    /// Writes the markers of the id's PrepareCommit/PrepareAbort transaction, then its
    /// Complete record. True once done (or once the coordinator no longer has the id); false
    /// when `deadline` passed first.
    async fn write_markers(&self, transactional_id: &str, deadline: Option<Instant>) -> bool {
        let Some(writer) = self.markers.borrow().clone() else { return false };
        let Some(prepared) = self.txns.borrow().get(transactional_id).map(|c| c.metadata.clone())
        else {
            return true;
        };
        if !matches!(prepared.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return true;
        }
        let marker = MarkerSpec {
            producer_id: prepared.producer_id,
            producer_epoch: prepared.producer_epoch,
            commit: prepared.state == TxnState::PrepareCommit,
            coordinator_epoch: self.coordinator_epoch(transactional_id),
        };
        let mut remaining: Vec<TopicPartition> = prepared.partitions.iter().cloned().collect();
        let mut pause = MARKER_RETRY_MS;
        loop {
            let writes =
                remaining.iter().map(|partition| writer.write_marker(partition.clone(), marker));
            let results = futures_util::future::join_all(writes).await;
            let mut left = Vec::new();
            for (partition, result) in remaining.into_iter().zip(results) {
                match result {
                    Ok(()) => {}
                    Err(MarkerFailure::GiveUp(why)) => {
                        tracing::warn!(transactional_id, %partition, %why, "transaction marker abandoned");
                    }
                    Err(MarkerFailure::Retry(why)) => {
                        tracing::debug!(transactional_id, %partition, %why, "transaction marker to retry");
                        left.push(partition);
                    }
                }
            }
            remaining = left;
            let still_ours = self
                .txns
                .borrow()
                .get(transactional_id)
                .is_some_and(|cell| cell.metadata == prepared);
            if !still_ours {
                return true; // another coordinator took the id over; it writes the markers
            }
            if remaining.is_empty() {
                break;
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return false;
            }
            shard::runtime::sleep(Duration::from_millis(pause)).await;
            pause = (pause * 2).min(MARKER_RETRY_MS_MAX);
        }
        let completed = state_machine::complete(&prepared, self.clock.now_ms());
        loop {
            match self.write(transactional_id, &completed).await {
                Ok(()) => {
                    self.stats.transaction_completed(completed.state == TxnState::CompleteCommit);
                    if prepared.start_ms >= 0 {
                        let open_ms = (completed.last_update_ms - prepared.start_ms).max(0) as u64;
                        let _ = self.durations_us.borrow_mut().record(open_ms.saturating_mul(1000));
                    }
                    return true;
                }
                Err(BrokerError::Txn(TxnError::NotCoordinator)) => return true,
                Err(error) => {
                    tracing::warn!(transactional_id, %error, "writing a completed transaction failed; retrying");
                    if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                        return false;
                    }
                    shard::runtime::sleep(Duration::from_millis(MARKER_RETRY_MS_MAX)).await;
                }
            }
        }
    }

    /// Goes on writing the id's markers until done; the id stays pending meanwhile.
    fn finish_in_background(self: &Rc<Self>, transactional_id: &str) {
        let service = self.clone();
        let id = transactional_id.to_string();
        shard::runtime::spawn(async move {
            service.write_markers(&id, None).await;
            service.release(&id);
        })
        .detach();
    }

    /// Follows leadership of `__transaction_state` partitions: one this shard now leads is
    /// replayed (and its prepared transactions finished), the ids of one it no longer leads
    /// are dropped here.
    pub async fn follow_leadership(self: &Rc<Self>) {
        let version = self.partitions.roles_version();
        if self.roles_seen.replace(Some(version)) == Some(version) {
            return;
        }
        let led = self.partitions.local_of_topic(TRANSACTION_STATE_TOPIC);
        let led_keys: HashSet<TopicPartition> = led.iter().map(|(key, _)| key.clone()).collect();
        let lost: Vec<TopicPartition> =
            self.loaded.borrow().iter().filter(|key| !led_keys.contains(*key)).cloned().collect();
        for partition in lost {
            let index = partition.partition.0;
            self.txns.borrow_mut().retain(|id, _| partition_for_transactional_id(id) != index);
            self.loaded.borrow_mut().remove(&partition);
            tracing::info!(%partition, "no longer coordinating the transactions of this partition");
        }
        for (partition, owned) in led {
            if self.loaded.borrow().contains(&partition) {
                continue;
            }
            let replayed = self.replay_partition(&partition, &owned.log).await;
            let prepared: Vec<String> = {
                let mut txns = self.txns.borrow_mut();
                for (id, metadata) in replayed {
                    txns.insert(id, TxnCell { metadata, pending: false });
                }
                txns.iter_mut()
                    .filter(|(id, cell)| {
                        partition_for_transactional_id(id) == partition.partition.0
                            && matches!(
                                cell.metadata.state,
                                TxnState::PrepareCommit | TxnState::PrepareAbort
                            )
                    })
                    .map(|(id, cell)| {
                        cell.pending = true;
                        id.clone()
                    })
                    .collect()
            };
            self.loaded.borrow_mut().insert(partition.clone());
            if prepared.is_empty() {
                tracing::debug!(%partition, "coordinating the transactions of this partition");
            } else {
                tracing::info!(%partition, prepared = prepared.len(), "coordinating the transactions of this partition; finishing the prepared ones");
            }
            for id in prepared {
                self.finish_in_background(&id);
            }
        }
    }

    /// The live ids of one `__transaction_state` partition (the last record of each; a
    /// tombstone removes it). Unreadable batches are skipped with a warning.
    async fn replay_partition(
        &self,
        partition: &TopicPartition,
        log: &shard::PartitionLog<S>,
    ) -> HashMap<String, TxnMetadata> {
        let mut live = HashMap::new();
        let mut offset = log.log_start_offset();
        while offset < log.log_end_offset() {
            let read = match log.read(offset, REPLAY_READ_BYTES).await {
                Ok(read) if !read.batches.is_empty() => read,
                Ok(_) => break,
                Err(error) => {
                    tracing::error!(%partition, offset, %error, "transaction replay stopped: unreadable");
                    break;
                }
            };
            for batch in read.batches {
                let Ok(header) =
                    wire::RecordBatchHeader::parse(&batch, shard::config::BATCH_BYTES_MAX)
                else {
                    break;
                };
                offset = header.last_offset() + 1;
                let Ok(records) = wire::compression::records_of(&header) else {
                    tracing::warn!(%partition, offset = header.base_offset(), "transaction replay skipped a batch");
                    continue;
                };
                for record in records {
                    let Some(id) = record.key.as_deref().and_then(stored::parse_key) else {
                        continue;
                    };
                    match record.value.as_deref() {
                        None => {
                            live.remove(&id);
                        }
                        Some(value) => match stored::parse_value(value) {
                            Some(metadata) => {
                                live.insert(id, metadata);
                            }
                            None => {
                                tracing::warn!(%partition, transactional_id = %id, "unreadable transaction record skipped")
                            }
                        },
                    }
                }
            }
        }
        live
    }

    /// Aborts transactions open longer than their timeout, fencing their producers (as
    /// Kafka's `abortTimedOutTransactions`).
    pub async fn abort_timed_out(self: &Rc<Self>) {
        let now = self.clock.now_ms();
        let expired = self.idle_ids_where(|metadata| {
            metadata.state == TxnState::Ongoing
                && metadata.start_ms + i64::from(metadata.timeout_ms) < now
        });
        for id in expired {
            let Ok(Some(current)) = self.take(&id) else { continue };
            let prepare_abort = state_machine::fence(&current, now);
            tracing::info!(transactional_id = %id, timeout_ms = current.timeout_ms, "aborting a transaction open past its timeout");
            match self.write(&id, &prepare_abort).await {
                Ok(()) => self.finish_in_background(&id),
                Err(error) => {
                    tracing::warn!(transactional_id = %id, %error, "aborting a timed-out transaction failed");
                    self.release(&id);
                }
            }
        }
    }

    /// The ids with no transition in progress whose metadata `wanted` selects.
    fn idle_ids_where(&self, wanted: impl Fn(&TxnMetadata) -> bool) -> Vec<String> {
        self.txns
            .borrow()
            .iter()
            .filter(|(_, cell)| !cell.pending && wanted(&cell.metadata))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Forgets transactional ids idle past `transactional.id.expiration.ms` with no
    /// transaction open (Kafka's `removeExpiredTransactionalIds`): a tombstone is written to
    /// `__transaction_state`, then the id is dropped. Its next InitProducerId starts afresh.
    pub async fn expire_ids(&self) {
        let horizon = self.clock.now_ms().saturating_sub(self.config.id_expiration_ms);
        let expired = self.idle_ids_where(|metadata| {
            matches!(
                metadata.state,
                TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
            ) && metadata.last_update_ms < horizon
        });
        for id in expired {
            let Ok(Some(_)) = self.take(&id) else { continue };
            match self.append_record(&id, None).await {
                Ok(()) => {
                    self.txns.borrow_mut().remove(&id);
                    tracing::info!(transactional_id = %id, "expired an idle transactional id");
                }
                Err(error) => {
                    tracing::warn!(transactional_id = %id, %error, "expiring a transactional id failed");
                    self.release(&id);
                }
            }
        }
    }

    /// The timer, forever: leadership changes, timed-out transactions, expired ids.
    pub async fn tick(self: Rc<Self>) {
        let interval = self.config.abort_interval_ms.clamp(10, 3_600_000);
        let mut last_expiry = self.clock.now_ms();
        loop {
            shard::runtime::sleep(Duration::from_millis(interval)).await;
            self.follow_leadership().await;
            self.abort_timed_out().await;
            let now = self.clock.now_ms();
            if now - last_expiry >= self.config.expiry_interval_ms {
                last_expiry = now;
                self.expire_ids().await;
            }
        }
    }
}

impl<S: Storage> Service for TransactionService<S> {
    const NAME: &'static str = "transactions";
    /// EndTxn waits for its markers (up to `MARKERS_INLINE_WAIT`).
    const IN_PROGRESS_MAX: usize = 16_384;
}
