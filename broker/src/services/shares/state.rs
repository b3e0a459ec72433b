//! A share partition's delivery state (KIP-932): which records of one topic partition one share
//! group has in flight, who holds them, how often each was delivered, and where the group's
//! window on the log starts and ends.
//!
//! Pure, no I/O and no clock of its own (every step takes `now_ms`), so a seeded model test
//! drives it (`broker/tests/share_partition_model.rs`).
//!
//! The window `[start, end)`: every offset below `start` (the share-partition start offset,
//! SPSO) is done with (acknowledged or archived) or was never delivered because the group starts
//! after it; every offset in the window has a slot; no offset at or past `end` (SPEO) was ever
//! acquired. Each slot is Available, Acquired (by one member, until a lock deadline),
//! Acknowledged or Archived, with its delivery count. `start` moves forward over the leading
//! slots that are done, so the first slot is never done.
//!
//! Rules (KIP-932, Kafka `SharePartition`):
//! - Acquiring takes Available slots and offsets past `end` from the batches read at
//!   `next_fetch_offset`, whole batches at a time until `max_records` is reached (Kafka's
//!   MaxRecords may be exceeded to end a batch), never past `start + record_locks_max` (Kafka's
//!   `group.share.partition.max.record.locks`). Each acquisition counts one delivery and locks
//!   the slot for `lock_ms`. Offsets the log does not hold (compacted, or before the first batch
//!   read) and batches the group must not see (transaction markers; aborted transactions for a
//!   read_committed group) are archived without a delivery.
//! - An acknowledgement is taken only for slots Acquired by the member that acknowledges, and
//!   all of a request's slots or none (INVALID_RECORD_STATE). Accept: Acknowledged. Reject and
//!   Gap: Archived. Release: Available again, or Archived once the delivery count reached the
//!   limit (`group.share.delivery.count.limit`).
//! - A lock that expires, and a member's session that ends (its connection closed, or its final
//!   ShareFetch or ShareAcknowledge), release as Release does.
//! - A new leader (`restore`) starts from what was persisted (`persisted`): Acknowledged and
//!   Archived stay so, Acquired becomes Available with the delivery count it had before it was
//!   acquired (the interrupted delivery does not count, as in Kafka, which persists no
//!   acquisition), other counts are kept.
//! - Records the log deleted (retention, DeleteRecords) leave the window: `start` moves up to
//!   the log start offset.
//!
//! Invariants (checked by `check`, on in release builds through the service after each step):
//! `start <= end`; `slots.len() == end - start`; the first slot is not done; an Acquired slot
//! has a member and a deadline; a delivery count never exceeds the limit; no slot is Acquired
//! with a delivery count of 0.
//! Runs on: the shard that leads the topic partition.

use std::collections::VecDeque;
use std::rc::Rc;

/// Which share partition a persisted state is about: (group, topic id, partition), the key of
/// Kafka's ShareSnapshot records.
pub type StateKey = (String, [u8; 16], i32);

/// The state of one record (Kafka's `RecordState`, with its persisted ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

impl RecordState {
    /// Kafka's id of the state (`RecordState.id`), as the share-group state records hold it.
    pub fn id(self) -> i8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    /// Acknowledged or archived: never delivered again.
    pub fn is_done(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// How a member acknowledges a record (ShareFetch's and ShareAcknowledge's AcknowledgeTypes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckType {
    /// Not a record (a gap in the offsets, a transaction marker): archived.
    Gap,
    Accept,
    Release,
    Reject,
}

impl AckType {
    /// The wire id (0 gap, 1 accept, 2 release, 3 reject); `None` for any other.
    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release),
            3 => Some(AckType::Reject),
            _ => None,
        }
    }
}

/// A share group's limits on one share partition (from the broker's `group.share.*` and the
/// group's `share.*` configs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `group.share.delivery.count.limit`: deliveries after which a released record is
    /// archived.
    pub delivery_count_limit: i16,
    /// `group.share.record.lock.duration.ms`.
    pub lock_ms: i64,
    /// `group.share.partition.max.record.locks`: the widest the window may be.
    pub record_locks_max: i64,
    /// The group has a dead-letter topic (KIP-1191): rejected records and records archived at
    /// the delivery limit are kept (`take_dead_letters`) to be copied there.
    pub dead_letters: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            delivery_count_limit: 5,
            lock_ms: 30_000,
            record_locks_max: 2_000,
            dead_letters: false,
        }
    }
}

/// Why a record goes to the dead-letter topic (KIP-1191's `__dlq.errors.message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterReason {
    Rejected,
    DeliveryLimit,
}

impl DeadLetterReason {
    /// Kafka's text for the reason.
    pub fn message(self) -> &'static str {
        match self {
            DeadLetterReason::Rejected => "Offset rejected by client.",
            DeadLetterReason::DeliveryLimit => "Offset delivery count exceeded the threshold.",
        }
    }
}

/// A record archived for the dead-letter topic: its offset and delivery count, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetter {
    pub offset: i64,
    pub delivery_count: i16,
    pub reason: DeadLetterReason,
}

/// One batch of the log as acquiring sees it: its offsets, and whether the group may have its
/// records (not a transaction marker, not an aborted transaction's for a read_committed group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub deliverable: bool,
}

/// A run of acquired offsets with one delivery count (ShareFetch's AcquiredRecords).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: i16,
}

/// Why an acknowledgement was refused (the service maps these to Kafka's codes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckError {
    /// A range that is empty or reversed, or a types array that does not fit it
    /// (INVALID_REQUEST).
    Malformed(String),
    /// An offset that is not acquired by this member (INVALID_RECORD_STATE).
    NotAcquired(i64),
}

/// What releasing did: slots made Available, and slots archived at the delivery limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    pub available: u64,
    pub archived: u64,
}

impl Released {
    fn add(&mut self, other: Released) {
        self.available += other.available;
        self.archived += other.archived;
    }
}

/// What an acknowledgement did, by type (for the metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Acknowledged {
    pub accepted: u64,
    pub released: Released,
    pub rejected: u64,
    pub gaps: u64,
}

#[derive(Debug, Clone)]
struct Slot {
    state: RecordState,
    delivery_count: i16,
    /// The member holding it (Acquired only).
    member: Option<Rc<str>>,
    /// When its lock expires (Acquired only).
    deadline_ms: i64,
}

impl Slot {
    fn available(delivery_count: i16) -> Self {
        Slot { state: RecordState::Available, delivery_count, member: None, deadline_ms: 0 }
    }

    fn archived() -> Self {
        Slot { state: RecordState::Archived, delivery_count: 0, member: None, deadline_ms: 0 }
    }
}

/// A run of slots in one state with one delivery count, as the share-group state holds it
/// (Kafka's `PersisterStateBatch`): Available, Acknowledged or Archived only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub state: RecordState,
    pub delivery_count: i16,
}

/// What a new leader needs to resume: the start offset and the window's runs that are not
/// plain never-delivered Available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persisted {
    pub start_offset: i64,
    pub batches: Vec<StateBatch>,
}

/// A persisted state as its share coordinator holds it: with its state epoch, which a reset
/// by a tool (AlterShareGroupOffsets, DeleteShareGroupOffsets) moves on, so the leader's
/// writes of the state before it are refused (FENCED_STATE_EPOCH).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub state: Persisted,
    pub state_epoch: i32,
    /// The leader epoch of its last write (-1 when read from another broker, whose
    /// ReadShareGroupState does not carry it).
    pub leader_epoch: i32,
}

/// One share group's delivery state of one topic partition.
#[derive(Debug, Clone)]
pub struct SharePartition {
    start: i64,
    slots: VecDeque<Slot>,
    limits: Limits,
    /// The earliest lock deadline of any Acquired slot (`i64::MAX`: none), so `expire_locks`
    /// skips the scan until then.
    next_deadline_ms: i64,
    /// Records archived for the dead-letter topic, not yet taken (`Limits::dead_letters`).
    dead: Vec<DeadLetter>,
}

impl SharePartition {
    /// A share partition no one has read yet, starting at `start_offset` (from
    /// `share.auto.offset.reset`).
    pub fn new(start_offset: i64, limits: Limits) -> Self {
        assert!(start_offset >= 0, "a share partition starts at an offset: {start_offset}");
        SharePartition {
            start: start_offset,
            slots: VecDeque::new(),
            limits,
            next_deadline_ms: i64::MAX,
            dead: Vec::new(),
        }
    }

    /// The records archived for the dead-letter topic since the last call.
    pub fn take_dead_letters(&mut self) -> Vec<DeadLetter> {
        std::mem::take(&mut self.dead)
    }

    /// Releases the slot at `offset` (see `release`), keeping a dead letter when it is archived
    /// at the limit.
    fn release_at(&mut self, offset: i64) -> Released {
        let (limit, keep) = (self.limits.delivery_count_limit, self.limits.dead_letters);
        let Some(slot) = self.slot_mut(offset) else { return Released::default() };
        let count = slot.delivery_count;
        let released = release(slot, limit);
        if keep && released.archived > 0 {
            let reason = DeadLetterReason::DeliveryLimit;
            self.dead.push(DeadLetter { offset, delivery_count: count, reason });
        }
        released
    }

    /// The offsets of Acquired slots that `pick` selects.
    fn acquired_where(&self, pick: impl Fn(&Slot) -> bool) -> Vec<i64> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.state == RecordState::Acquired && pick(slot))
            .map(|(index, _)| self.start + index as i64)
            .collect()
    }

    /// A share partition resumed from its persisted state on a new leader: Acquired records
    /// (whose locks were the old leader's) are Available again.
    pub fn restore(persisted: &Persisted, limits: Limits) -> Self {
        let mut partition = SharePartition::new(persisted.start_offset.max(0), limits);
        for batch in &persisted.batches {
            let first = batch.first_offset.max(partition.start);
            if batch.last_offset < first {
                continue;
            }
            // Runs are in order; one that overlaps an earlier one is read from where it ends.
            let from = first.max(partition.end());
            for _ in partition.end()..from {
                partition.slots.push_back(Slot::available(0));
            }
            for _ in from..=batch.last_offset {
                let count = batch.delivery_count.clamp(0, limits.delivery_count_limit);
                let slot = match batch.state {
                    RecordState::Acknowledged | RecordState::Archived => Slot {
                        state: batch.state,
                        delivery_count: count,
                        member: None,
                        deadline_ms: 0,
                    },
                    RecordState::Available | RecordState::Acquired => Slot::available(count),
                };
                partition.slots.push_back(slot);
            }
        }
        partition.advance_start();
        partition.check();
        partition
    }

    /// The share-partition start offset (SPSO).
    pub fn start_offset(&self) -> i64 {
        self.start
    }

    /// The share-partition end offset (SPEO): the first offset never acquired.
    pub fn end(&self) -> i64 {
        self.start + self.slots.len() as i64
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// New limits (a group config changed); slots already acquired keep their deadlines.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The state and delivery count of `offset`: `None` outside the window.
    pub fn state_of(&self, offset: i64) -> Option<(RecordState, i16)> {
        let slot = self.slot(offset)?;
        Some((slot.state, slot.delivery_count))
    }

    /// The member holding `offset`, if it is Acquired.
    pub fn holder_of(&self, offset: i64) -> Option<&str> {
        self.slot(offset).and_then(|slot| slot.member.as_deref())
    }

    /// Records acquired now (in flight to consumers).
    pub fn acquired_count(&self) -> u64 {
        self.slots.iter().filter(|slot| slot.state == RecordState::Acquired).count() as u64
    }

    /// Whether anything can be acquired now without reading past `end` (a redelivery).
    pub fn has_available(&self) -> bool {
        self.slots.iter().any(|slot| slot.state == RecordState::Available)
    }

    /// Where the next read of the log for this group starts: the first Available slot, else
    /// `end`. `None` when the window is full and nothing in it is Available.
    pub fn next_fetch_offset(&self) -> Option<i64> {
        if let Some(index) = self.slots.iter().position(|slot| slot.state == RecordState::Available)
        {
            return Some(self.start + index as i64);
        }
        (self.end() < self.start + self.limits.record_locks_max).then_some(self.end())
    }

    fn slot(&self, offset: i64) -> Option<&Slot> {
        let index = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.slots.get(index)
    }

    fn slot_mut(&mut self, offset: i64) -> Option<&mut Slot> {
        let index = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.slots.get_mut(index)
    }

    /// The log now starts at `log_start_offset` (retention, DeleteRecords): records before it
    /// are gone, and leave the window.
    pub fn log_starts_at(&mut self, log_start_offset: i64) {
        while self.start < log_start_offset {
            if self.slots.pop_front().is_none() {
                self.start = log_start_offset;
                break;
            }
            self.start += 1;
        }
        self.advance_start();
        self.recompute_deadline();
    }

    /// Acquires for `member` what it may have of `batches` (read from the log at
    /// `next_fetch_offset`, in offset order), until `max_records` are acquired or the window
    /// is full. Answers the runs acquired, and which of `batches` hold at least one of them.
    pub fn acquire(
        &mut self,
        member: &str,
        batches: &[LogBatch],
        max_records: usize,
        now_ms: i64,
    ) -> (Vec<Acquired>, Vec<usize>) {
        let member: Rc<str> = Rc::from(member);
        let deadline_ms = now_ms.saturating_add(self.limits.lock_ms);
        let limit_end = self.start + self.limits.record_locks_max;
        let mut acquired: Vec<Acquired> = Vec::new();
        let mut holding = Vec::new();
        let mut count = 0usize;
        for (index, batch) in batches.iter().enumerate() {
            if count >= max_records || batch.last_offset < batch.base_offset {
                break;
            }
            let mut took = false;
            for offset in batch.base_offset.max(self.start)..=batch.last_offset {
                if offset >= limit_end {
                    break;
                }
                if offset >= self.end() {
                    // Offsets the log does not hold between the window's end and this batch.
                    while self.end() < offset {
                        self.slots.push_back(Slot::archived());
                    }
                    let slot =
                        if batch.deliverable { Slot::available(0) } else { Slot::archived() };
                    self.slots.push_back(slot);
                }
                let Some(slot) = self.slot_mut(offset) else { continue };
                if !batch.deliverable || slot.state != RecordState::Available {
                    if !batch.deliverable && slot.state == RecordState::Available {
                        *slot = Slot::archived();
                    }
                    continue;
                }
                slot.state = RecordState::Acquired;
                slot.delivery_count = slot.delivery_count.saturating_add(1);
                slot.member = Some(member.clone());
                slot.deadline_ms = deadline_ms;
                let delivery_count = slot.delivery_count;
                count += 1;
                took = true;
                match acquired.last_mut() {
                    Some(run)
                        if run.last_offset + 1 == offset
                            && run.delivery_count == delivery_count =>
                    {
                        run.last_offset = offset
                    }
                    _ => acquired.push(Acquired {
                        first_offset: offset,
                        last_offset: offset,
                        delivery_count,
                    }),
                }
            }
            if took {
                holding.push(index);
            }
        }
        if count > 0 {
            self.next_deadline_ms = self.next_deadline_ms.min(deadline_ms);
        }
        self.advance_start();
        (acquired, holding)
    }

    /// Applies a request's acknowledgement ranges of `member` (ascending, not overlapping),
    /// all or none: each range's `types` has one entry for the whole range or one per offset.
    pub fn acknowledge_all(
        &mut self,
        member: &str,
        ranges: &[(i64, i64, &[AckType])],
    ) -> Result<Acknowledged, AckError> {
        let mut previous_last: Option<i64> = None;
        for &(first_offset, last_offset, types) in ranges {
            if previous_last.is_some_and(|last| first_offset <= last) {
                return Err(AckError::Malformed(format!(
                    "acknowledgement ranges overlap or are out of order at {first_offset}"
                )));
            }
            self.check_range(member, first_offset, last_offset, types)?;
            previous_last = Some(last_offset);
        }
        let mut total = Acknowledged::default();
        for &(first_offset, last_offset, types) in ranges {
            let done = self.acknowledge(member, first_offset, last_offset, types)?;
            total.accepted += done.accepted;
            total.rejected += done.rejected;
            total.gaps += done.gaps;
            total.released.add(done.released);
        }
        Ok(total)
    }

    fn check_range(
        &self,
        member: &str,
        first_offset: i64,
        last_offset: i64,
        types: &[AckType],
    ) -> Result<(), AckError> {
        if last_offset < first_offset {
            return Err(AckError::Malformed(format!(
                "acknowledgement range {first_offset}..={last_offset} is reversed"
            )));
        }
        let length = last_offset - first_offset + 1;
        if types.is_empty() || (types.len() != 1 && types.len() as i64 != length) {
            return Err(AckError::Malformed(format!(
                "{} acknowledge types for {length} offsets",
                types.len()
            )));
        }
        for offset in first_offset..=last_offset {
            let held = self.slot(offset).is_some_and(|slot| {
                slot.state == RecordState::Acquired && slot.member.as_deref() == Some(member)
            });
            if !held {
                return Err(AckError::NotAcquired(offset));
            }
        }
        Ok(())
    }

    /// Applies one acknowledgement range of `member`: `types` has one entry for the whole
    /// range or one per offset. All or nothing.
    pub fn acknowledge(
        &mut self,
        member: &str,
        first_offset: i64,
        last_offset: i64,
        types: &[AckType],
    ) -> Result<Acknowledged, AckError> {
        self.check_range(member, first_offset, last_offset, types)?;
        let mut done = Acknowledged::default();
        let keep = self.limits.dead_letters;
        for offset in first_offset..=last_offset {
            // `check_range` checked the length (one type, or one per offset).
            let at = if types.len() == 1 { 0 } else { (offset - first_offset) as usize };
            let Some(&kind) = types.get(at) else { continue };
            if kind == AckType::Release {
                let released = self.release_at(offset);
                done.released.add(released);
                continue;
            }
            let Some(slot) = self.slot_mut(offset) else { continue };
            let count = slot.delivery_count;
            match kind {
                AckType::Accept => {
                    done.accepted += 1;
                    finish(slot, RecordState::Acknowledged);
                }
                AckType::Reject => {
                    done.rejected += 1;
                    finish(slot, RecordState::Archived);
                    if keep {
                        let reason = DeadLetterReason::Rejected;
                        self.dead.push(DeadLetter { offset, delivery_count: count, reason });
                    }
                }
                AckType::Gap | AckType::Release => {
                    done.gaps += 1;
                    finish(slot, RecordState::Archived);
                }
            }
        }
        self.advance_start();
        self.recompute_deadline();
        Ok(done)
    }

    /// Releases every slot whose lock expired by `now_ms`.
    pub fn expire_locks(&mut self, now_ms: i64) -> Released {
        if now_ms < self.next_deadline_ms {
            return Released::default();
        }
        let mut released = Released::default();
        for offset in self.acquired_where(|slot| slot.deadline_ms <= now_ms) {
            released.add(self.release_at(offset));
        }
        self.advance_start();
        self.recompute_deadline();
        released
    }

    /// Releases every slot `member` holds (its share session ended).
    pub fn release_member(&mut self, member: &str) -> Released {
        let mut released = Released::default();
        for offset in self.acquired_where(|slot| slot.member.as_deref() == Some(member)) {
            released.add(self.release_at(offset));
        }
        self.advance_start();
        self.recompute_deadline();
        released
    }

    /// The state a new leader resumes from (Acquired is written as Available with the count
    /// before its acquisition: locks do not survive a leader change, and the interrupted
    /// delivery does not count).
    pub fn persisted(&self) -> Persisted {
        let mut batches: Vec<StateBatch> = Vec::new();
        for (index, slot) in self.slots.iter().enumerate() {
            let offset = self.start + index as i64;
            // An acquisition the leader change interrupts does not count (as Kafka, whose
            // persisted count is the one before the acquisition).
            let (state, delivery_count) = match slot.state {
                RecordState::Acquired => (RecordState::Available, slot.delivery_count - 1),
                other => (other, slot.delivery_count),
            };
            if state == RecordState::Available && delivery_count == 0 {
                continue;
            }
            match batches.last_mut() {
                Some(run)
                    if run.last_offset + 1 == offset
                        && run.state == state
                        && run.delivery_count == delivery_count =>
                {
                    run.last_offset = offset
                }
                _ => batches.push(StateBatch {
                    first_offset: offset,
                    last_offset: offset,
                    state,
                    delivery_count,
                }),
            }
        }
        Persisted { start_offset: self.start, batches }
    }

    /// Moves `start` past the leading slots that are done.
    fn advance_start(&mut self) {
        while self.slots.front().is_some_and(|slot| slot.state.is_done()) {
            self.slots.pop_front();
            self.start += 1;
        }
    }

    fn recompute_deadline(&mut self) {
        self.next_deadline_ms = self
            .slots
            .iter()
            .filter(|slot| slot.state == RecordState::Acquired)
            .map(|slot| slot.deadline_ms)
            .min()
            .unwrap_or(i64::MAX);
    }

    /// The invariants of the module notes; a violation is a bug here.
    pub fn check(&self) {
        assert!(self.start >= 0, "start offset {} < 0", self.start);
        if let Some(first) = self.slots.front() {
            assert!(!first.state.is_done(), "the first slot ({}) is done", self.start);
        }
        for (index, slot) in self.slots.iter().enumerate() {
            let offset = self.start + index as i64;
            assert!(slot.delivery_count >= 0, "offset {offset}: count {}", slot.delivery_count);
            if slot.state == RecordState::Acquired {
                assert!(slot.member.is_some(), "offset {offset}: acquired by no one");
                assert!(slot.delivery_count > 0, "offset {offset}: acquired, never delivered");
                assert!(slot.deadline_ms >= self.next_deadline_ms, "offset {offset}: lock missed");
            } else {
                assert!(slot.member.is_none(), "offset {offset}: {:?} with a holder", slot.state);
            }
        }
    }
}

fn finish(slot: &mut Slot, state: RecordState) {
    slot.state = state;
    slot.member = None;
    slot.deadline_ms = 0;
}

/// Release: Available again, or Archived once it was delivered `limit` times.
fn release(slot: &mut Slot, limit: i16) -> Released {
    if slot.delivery_count >= limit {
        finish(slot, RecordState::Archived);
        Released { available: 0, archived: 1 }
    } else {
        finish(slot, RecordState::Available);
        Released { available: 1, archived: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base_offset: i64, last_offset: i64) -> LogBatch {
        LogBatch { base_offset, last_offset, deliverable: true }
    }

    #[test]
    fn records_acquired_then_accepted_move_the_start_offset() {
        let mut partition = SharePartition::new(0, Limits::default());
        let (acquired, holding) = partition.acquire("a", &[batch(0, 4), batch(5, 9)], 3, 0);
        // Whole batches: MaxRecords is passed to finish the first batch only.
        assert_eq!(acquired, vec![Acquired { first_offset: 0, last_offset: 4, delivery_count: 1 }]);
        assert_eq!(holding, vec![0]);
        assert_eq!(partition.end(), 5);
        partition.acknowledge("a", 0, 1, &[AckType::Accept]).unwrap();
        assert_eq!(partition.start_offset(), 2);
        assert_eq!(
            partition.acknowledge("b", 2, 2, &[AckType::Accept]),
            Err(AckError::NotAcquired(2))
        );
        partition.check();
    }

    #[test]
    fn a_released_record_is_archived_at_the_delivery_limit() {
        let limits = Limits { delivery_count_limit: 2, dead_letters: true, ..Limits::default() };
        let mut partition = SharePartition::new(0, limits);
        partition.acquire("a", &[batch(0, 0)], 10, 0);
        partition.acknowledge("a", 0, 0, &[AckType::Release]).unwrap();
        assert_eq!(partition.state_of(0), Some((RecordState::Available, 1)));
        let (acquired, _) = partition.acquire("b", &[batch(0, 0)], 10, 0);
        assert_eq!(acquired[0].delivery_count, 2);
        let done = partition.acknowledge("b", 0, 0, &[AckType::Release]).unwrap();
        assert_eq!(done.released, Released { available: 0, archived: 1 });
        assert_eq!(partition.start_offset(), 1);
        let letters = partition.take_dead_letters();
        let reason = DeadLetterReason::DeliveryLimit;
        assert_eq!(letters, vec![DeadLetter { offset: 0, delivery_count: 2, reason }]);
        assert!(partition.take_dead_letters().is_empty());
    }

    #[test]
    fn locks_expire_and_a_restored_partition_keeps_what_was_done() {
        let mut partition = SharePartition::new(10, Limits { lock_ms: 100, ..Limits::default() });
        partition.acquire("a", &[batch(8, 14)], 100, 0);
        assert_eq!(partition.start_offset(), 10);
        partition.acknowledge("a", 12, 12, &[AckType::Accept]).unwrap();
        assert_eq!(partition.expire_locks(99), Released::default());
        assert_eq!(partition.expire_locks(100).available, 4);
        let restored = SharePartition::restore(&partition.persisted(), partition.limits());
        assert_eq!(restored.state_of(12), Some((RecordState::Acknowledged, 1)));
        // Released by the lock timeout: one delivery counted.
        assert_eq!(restored.state_of(10), Some((RecordState::Available, 1)));
        assert_eq!(restored.end(), 15);
    }

    #[test]
    fn markers_and_missing_offsets_are_archived_without_a_delivery() {
        let mut partition = SharePartition::new(0, Limits::default());
        let marker = LogBatch { base_offset: 3, last_offset: 3, deliverable: false };
        let (acquired, holding) = partition.acquire("a", &[batch(2, 2), marker, batch(4, 5)], 9, 0);
        assert_eq!(holding, vec![0, 2]);
        assert_eq!(acquired.len(), 2);
        // 0 and 1 are not in the log: archived, and the start moved past them.
        assert_eq!(partition.start_offset(), 2);
        assert_eq!(partition.state_of(3), Some((RecordState::Archived, 0)));
    }

    #[test]
    fn the_window_is_bounded_by_the_record_locks() {
        let limits = Limits { record_locks_max: 4, ..Limits::default() };
        let mut partition = SharePartition::new(0, limits);
        let (acquired, _) = partition.acquire("a", &[batch(0, 9)], 100, 0);
        assert_eq!(acquired[0].last_offset, 3);
        assert_eq!(partition.next_fetch_offset(), None);
        partition.acknowledge("a", 0, 0, &[AckType::Accept]).unwrap();
        assert_eq!(partition.next_fetch_offset(), Some(4));
    }
}
