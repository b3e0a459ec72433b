//! A transactional id's coordinator state and Kafka's transitions (`TransactionMetadata`,
//! `TransactionCoordinator`, transaction version 1). Pure: each step takes the current
//! metadata and `now`, and answers either at once or with the metadata to write durably
//! before the answer (the service writes it, then applies it).
//!
//! States: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead,
//! PrepareEpochFence (ids as Kafka's, which are stored and shown by DescribeTransactions).

use crate::error::TxnError;
use std::collections::BTreeSet;
use wire::ids::TopicPartition;

/// The highest epoch before a producer id is exhausted (Kafka: `Short.MaxValue - 1`).
pub const EPOCH_MAX: i16 = i16::MAX - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TxnState {
    Empty = 0,
    Ongoing = 1,
    PrepareCommit = 2,
    PrepareAbort = 3,
    CompleteCommit = 4,
    CompleteAbort = 5,
    Dead = 6,
    PrepareEpochFence = 7,
}

impl TxnState {
    pub fn from_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The name DescribeTransactions and ListTransactions use (Kafka's `TransactionState`).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Whether a transactional id in this state may move to `next` (Kafka's
    /// `TransactionState.validPreviousStates`, read the other way).
    pub fn may_become(self, next: TxnState) -> bool {
        use TxnState::*;
        match next {
            Empty => matches!(self, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(self, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => self == Ongoing,
            PrepareAbort => matches!(self, Ongoing | PrepareEpochFence),
            CompleteCommit => self == PrepareCommit,
            CompleteAbort => self == PrepareAbort,
            Dead => matches!(self, Empty | CompleteCommit | CompleteAbort),
            PrepareEpochFence => self == Ongoing,
        }
    }

    fn is_complete_or_empty(self) -> bool {
        matches!(self, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort)
    }
}

/// One transactional id's metadata (what its records hold, plus the last epoch in memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump (KIP-360: a retried InitProducerId gets the current one
    /// back); -1 none. Not stored, as in Kafka.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction began (its first AddPartitions); -1 none.
    pub start_ms: i64,
    pub last_update_ms: i64,
}

impl TxnMetadata {
    /// A new id's metadata: Empty with `producer_epoch`.
    pub fn new(producer_id: i64, producer_epoch: i16, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMetadata {
            producer_id,
            producer_epoch,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
        }
    }
}

/// What InitProducerId does for an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitStep {
    /// Write this (Empty, a bumped epoch) and answer its producer id and epoch.
    Write(TxnMetadata),
    /// The epoch is exhausted: a new producer id is needed, then `Write` with epoch 0.
    NewProducerId,
    /// A retry of a bump that succeeded: answer the current id and epoch, nothing written.
    Answer(i64, i16),
    /// An Ongoing transaction: fence it (write PrepareAbort with this bumped epoch, write its
    /// abort markers, CompleteAbort) and answer CONCURRENT_TRANSACTIONS; the client retries.
    Fence(TxnMetadata),
}

/// InitProducerId for an id that has metadata (`TransactionCoordinator.handleInitProducerId`).
/// `expected`: the (producer id, epoch) a KIP-360 client sends (v3+), if any.
pub fn init_producer_id(
    current: &TxnMetadata,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
    now_ms: i64,
) -> Result<InitStep, TxnError> {
    if let Some((producer_id, _)) = expected {
        if current.producer_epoch >= 0 && producer_id != current.producer_id {
            return Err(TxnError::ProducerFenced);
        }
    }
    match current.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
            Err(TxnError::ConcurrentTransactions)
        }
        TxnState::Ongoing => Ok(InitStep::Fence(fence(current, now_ms))),
        TxnState::Dead => Err(TxnError::ConcurrentTransactions),
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
            let expected_epoch = expected.map(|(_, epoch)| epoch);
            let bump = match expected_epoch {
                None => true,
                Some(epoch) if epoch == current.producer_epoch || current.producer_epoch < 0 => {
                    true
                }
                Some(epoch) if epoch == current.last_producer_epoch => {
                    return Ok(InitStep::Answer(current.producer_id, current.producer_epoch))
                }
                Some(_) => return Err(TxnError::ProducerFenced),
            };
            debug_assert!(bump);
            if current.producer_epoch >= EPOCH_MAX {
                return Ok(InitStep::NewProducerId);
            }
            let mut next = current.clone();
            next.last_producer_epoch =
                if expected_epoch.is_some() { current.producer_epoch } else { -1 };
            next.producer_epoch = current.producer_epoch + 1;
            next.timeout_ms = timeout_ms;
            next.state = TxnState::Empty;
            next.partitions.clear();
            next.start_ms = -1;
            next.last_update_ms = now_ms;
            Ok(InitStep::Write(next))
        }
    }
}

/// The PrepareAbort that fences an Ongoing transaction's producer (its epoch bumped, unless it
/// cannot be bumped any more).
pub fn fence(current: &TxnMetadata, now_ms: i64) -> TxnMetadata {
    let mut next = current.clone();
    if next.producer_epoch < EPOCH_MAX {
        next.producer_epoch += 1;
    }
    next.last_producer_epoch = -1;
    next.state = TxnState::PrepareAbort;
    next.last_update_ms = now_ms;
    next
}

/// Checks that (producer id, epoch) is the id's current producer.
fn check_producer(
    current: &TxnMetadata,
    producer_id: i64,
    producer_epoch: i16,
) -> Result<(), TxnError> {
    if producer_id != current.producer_id {
        return Err(TxnError::InvalidProducerIdMapping);
    }
    if producer_epoch != current.producer_epoch {
        return Err(TxnError::ProducerFenced);
    }
    Ok(())
}

/// AddPartitionsToTxn (and AddOffsetsToTxn): `None` when every partition is already in the
/// Ongoing transaction (nothing to write), else the Ongoing metadata to write.
pub fn add_partitions(
    current: &TxnMetadata,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[TopicPartition],
    now_ms: i64,
) -> Result<Option<TxnMetadata>, TxnError> {
    check_producer(current, producer_id, producer_epoch)?;
    match current.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
            return Err(TxnError::ConcurrentTransactions)
        }
        TxnState::Dead => return Err(TxnError::InvalidProducerIdMapping),
        TxnState::Ongoing if partitions.iter().all(|p| current.partitions.contains(p)) => {
            return Ok(None)
        }
        _ => {}
    }
    let mut next = current.clone();
    if current.state.is_complete_or_empty() {
        next.partitions.clear();
        next.start_ms = now_ms;
    }
    next.state = TxnState::Ongoing;
    next.partitions.extend(partitions.iter().cloned());
    next.last_update_ms = now_ms;
    Ok(Some(next))
}

/// Partition verification (KIP-890 part 1, Kafka's `handleVerifyPartitionsInTransaction`):
/// whether each partition is in the producer's Ongoing transaction. Nothing is written.
pub fn verify_partitions(
    current: &TxnMetadata,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[TopicPartition],
) -> Result<Vec<bool>, TxnError> {
    check_producer(current, producer_id, producer_epoch)?;
    match current.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
            Err(TxnError::ConcurrentTransactions)
        }
        TxnState::Ongoing => {
            Ok(partitions.iter().map(|p| current.partitions.contains(p)).collect())
        }
        _ => Ok(vec![false; partitions.len()]),
    }
}

/// What EndTxn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndStep {
    /// Write this PrepareCommit/PrepareAbort, then the markers, then complete.
    Prepare(TxnMetadata),
    /// A retry of an end that already completed: success, nothing written.
    Done,
}

/// EndTxn (`TransactionCoordinator.endTransaction`, from the client).
pub fn end_transaction(
    current: &TxnMetadata,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    now_ms: i64,
) -> Result<EndStep, TxnError> {
    check_producer(current, producer_id, producer_epoch)?;
    match (current.state, commit) {
        (TxnState::Ongoing, _) => {
            let mut next = current.clone();
            next.state = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
            next.last_update_ms = now_ms;
            Ok(EndStep::Prepare(next))
        }
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Err(TxnError::ConcurrentTransactions)
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(EndStep::Done),
        (TxnState::PrepareEpochFence, _) => Err(TxnError::ConcurrentTransactions),
        (TxnState::PrepareCommit, false) => Err(TxnError::InvalidTxnState("it is committing")),
        (TxnState::PrepareAbort, true) => Err(TxnError::InvalidTxnState("it is aborting")),
        (TxnState::CompleteCommit, false) => Err(TxnError::InvalidTxnState("it committed")),
        (TxnState::CompleteAbort, true) => Err(TxnError::InvalidTxnState("it aborted")),
        (TxnState::Empty, _) => Err(TxnError::InvalidTxnState("no transaction is open")),
        (TxnState::Dead, _) => Err(TxnError::InvalidProducerIdMapping),
    }
}

/// The Complete state after a Prepare one's markers are all written.
pub fn complete(current: &TxnMetadata, now_ms: i64) -> TxnMetadata {
    let mut next = current.clone();
    next.state = match current.state {
        TxnState::PrepareCommit => TxnState::CompleteCommit,
        _ => TxnState::CompleteAbort,
    };
    next.partitions.clear();
    next.last_update_ms = now_ms;
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new("t", partition)
    }

    #[test]
    fn a_transaction_goes_round_kafkas_states() {
        let empty = TxnMetadata::new(7, 0, 60_000, 0);
        let ongoing = add_partitions(&empty, 7, 0, &[tp(0), tp(1)], 10).unwrap().unwrap();
        assert_eq!(
            (ongoing.state, ongoing.start_ms, ongoing.partitions.len()),
            (TxnState::Ongoing, 10, 2)
        );
        assert_eq!(add_partitions(&ongoing, 7, 0, &[tp(1)], 11), Ok(None));
        let more = add_partitions(&ongoing, 7, 0, &[tp(2)], 12).unwrap().unwrap();
        assert_eq!((more.partitions.len(), more.start_ms), (3, 10));
        let EndStep::Prepare(prepare) = end_transaction(&more, 7, 0, true, 13).unwrap() else {
            panic!("prepare")
        };
        assert_eq!(prepare.state, TxnState::PrepareCommit);
        assert_eq!(
            add_partitions(&prepare, 7, 0, &[tp(0)], 14),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            end_transaction(&prepare, 7, 0, true, 14),
            Err(TxnError::ConcurrentTransactions)
        );
        assert!(matches!(
            end_transaction(&prepare, 7, 0, false, 14),
            Err(TxnError::InvalidTxnState(_))
        ));
        let done = complete(&prepare, 15);
        assert_eq!((done.state, done.partitions.len()), (TxnState::CompleteCommit, 0));
        assert_eq!(end_transaction(&done, 7, 0, true, 16), Ok(EndStep::Done));
        assert!(matches!(
            end_transaction(&done, 7, 0, false, 16),
            Err(TxnError::InvalidTxnState(_))
        ));
        // The next transaction starts from CompleteCommit.
        let next = add_partitions(&done, 7, 0, &[tp(5)], 20).unwrap().unwrap();
        assert_eq!((next.state, next.start_ms, next.partitions.len()), (TxnState::Ongoing, 20, 1));
    }

    #[test]
    fn every_step_is_a_legal_transition() {
        use TxnState::*;
        // Kafka's table, read as "from -> to".
        assert!(Empty.may_become(Ongoing) && CompleteAbort.may_become(Ongoing));
        assert!(Ongoing.may_become(PrepareCommit) && Ongoing.may_become(PrepareAbort));
        assert!(PrepareCommit.may_become(CompleteCommit) && PrepareAbort.may_become(CompleteAbort));
        assert!(!Empty.may_become(PrepareCommit) && !PrepareCommit.may_become(Ongoing));
        assert!(!PrepareAbort.may_become(CompleteCommit) && !Dead.may_become(Empty));
        // The steps this module decides, from every state they start from.
        let empty = TxnMetadata::new(7, 0, 60_000, 0);
        let ongoing = add_partitions(&empty, 7, 0, &[tp(0)], 1).unwrap().unwrap();
        assert!(empty.state.may_become(ongoing.state));
        for commit in [true, false] {
            let EndStep::Prepare(prepare) = end_transaction(&ongoing, 7, 0, commit, 2).unwrap()
            else {
                panic!("prepare")
            };
            assert!(ongoing.state.may_become(prepare.state));
            let done = complete(&prepare, 3);
            assert!(prepare.state.may_become(done.state));
            let again = add_partitions(&done, 7, 0, &[tp(1)], 4).unwrap().unwrap();
            assert!(done.state.may_become(again.state));
        }
    }

    #[test]
    fn verification_answers_whether_partitions_are_in_the_ongoing_transaction() {
        let empty = TxnMetadata::new(7, 2, 60_000, 0);
        // Nothing added yet: no partition is in a transaction.
        assert_eq!(verify_partitions(&empty, 7, 2, &[tp(0)]), Ok(vec![false]));
        let ongoing = add_partitions(&empty, 7, 2, &[tp(0)], 1).unwrap().unwrap();
        assert_eq!(verify_partitions(&ongoing, 7, 2, &[tp(0), tp(1)]), Ok(vec![true, false]));
        assert_eq!(verify_partitions(&ongoing, 7, 1, &[tp(0)]), Err(TxnError::ProducerFenced));
        assert_eq!(
            verify_partitions(&ongoing, 8, 2, &[tp(0)]),
            Err(TxnError::InvalidProducerIdMapping)
        );
        let EndStep::Prepare(prepare) = end_transaction(&ongoing, 7, 2, false, 2).unwrap() else {
            panic!("prepare")
        };
        assert_eq!(
            verify_partitions(&prepare, 7, 2, &[tp(0)]),
            Err(TxnError::ConcurrentTransactions)
        );
        // Once the transaction is over, its partitions are no longer in one: a late batch of
        // it is refused.
        let done = complete(&prepare, 3);
        assert_eq!(verify_partitions(&done, 7, 2, &[tp(0)]), Ok(vec![false]));
    }

    #[test]
    fn producers_are_checked_and_fenced() {
        let empty = TxnMetadata::new(7, 3, 60_000, 0);
        assert_eq!(
            add_partitions(&empty, 8, 3, &[tp(0)], 1),
            Err(TxnError::InvalidProducerIdMapping)
        );
        assert_eq!(add_partitions(&empty, 7, 2, &[tp(0)], 1), Err(TxnError::ProducerFenced));
        assert!(matches!(
            end_transaction(&empty, 7, 3, true, 1),
            Err(TxnError::InvalidTxnState(_))
        ));
        // InitProducerId on Empty bumps the epoch.
        let InitStep::Write(bumped) = init_producer_id(&empty, 30_000, None, 2).unwrap() else {
            panic!("write")
        };
        assert_eq!(
            (bumped.producer_epoch, bumped.timeout_ms, bumped.state),
            (4, 30_000, TxnState::Empty)
        );
        // On an Ongoing transaction it fences: PrepareAbort with the next epoch.
        let ongoing = add_partitions(&bumped, 7, 4, &[tp(0)], 3).unwrap().unwrap();
        let InitStep::Fence(fenced) = init_producer_id(&ongoing, 30_000, None, 4).unwrap() else {
            panic!("fence")
        };
        assert_eq!((fenced.producer_epoch, fenced.state), (5, TxnState::PrepareAbort));
        assert_eq!(end_transaction(&fenced, 7, 4, true, 5), Err(TxnError::ProducerFenced));
        // KIP-360: the current epoch bumps; the last one answers the current; others are fenced.
        let done = complete(&fenced, 6);
        let InitStep::Write(again) = init_producer_id(&done, 30_000, Some((7, 5)), 7).unwrap()
        else {
            panic!("write")
        };
        assert_eq!((again.producer_epoch, again.last_producer_epoch), (6, 5));
        assert_eq!(init_producer_id(&again, 30_000, Some((7, 5)), 8), Ok(InitStep::Answer(7, 6)));
        assert_eq!(
            init_producer_id(&again, 30_000, Some((7, 1)), 8),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            init_producer_id(&again, 30_000, Some((9, 6)), 8),
            Err(TxnError::ProducerFenced)
        );
        // An exhausted epoch needs a new producer id.
        let mut old = TxnMetadata::new(7, EPOCH_MAX, 60_000, 0);
        old.state = TxnState::CompleteAbort;
        assert_eq!(init_producer_id(&old, 30_000, None, 9), Ok(InitStep::NewProducerId));
    }
}
