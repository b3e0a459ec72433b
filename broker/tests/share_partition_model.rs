//! Seeded model tests of a share partition's delivery state (`broker::services::shares::state`,
//! KIP-932), with no I/O: members acquire from a log that grows (with transaction markers and
//! holes), acknowledge what they hold (accept, release, reject, gap) and sometimes what they do
//! not, let locks expire, close their sessions, and the partition changes leader (its state
//! goes through `persisted` and `restore`, as a new leader reads it back) or loses its oldest
//! records to retention.
//!
//! A plain per-offset model runs beside it, and after every step the test checks KIP-932's
//! rules against it:
//! 1. a record is acquired only while Available (or never delivered), deliverable and inside
//!    the window (`share.partition.max.record.locks`), and its delivery count goes up by one;
//! 2. an acknowledgement is taken exactly when every offset in it is held by the member that
//!    sends it, and then all of it (INVALID_RECORD_STATE otherwise, nothing changed);
//! 3. accept → Acknowledged, reject and gap → Archived, release (and a lock timeout, and a
//!    session end) → Available, or Archived once the delivery count reached the limit;
//! 4. an accepted or archived record is never acquired again, and no acquisition's delivery
//!    count exceeds the limit;
//! 5. a leader change keeps Acknowledged and Archived and the delivery counts, and makes
//!    Acquired records Available with the count they had before (the interrupted delivery does
//!    not count);
//! 6. the start offset is the first offset not done, and the state of every offset in the
//!    window is the model's.
//!
//! At the end every member accepts whatever it gets until nothing is left: the start offset
//! must reach the log end, every deliverable record having been accepted exactly once or
//! archived (nothing lost, nothing twice).
//! A failure names its seed: `SEED=<n> cargo test -p broker --test share_partition_model`
//! replays it; `SEEDS=<count>` runs more seeds.
//! References: KIP-932 ("In-flight records", "Delivery count"); Kafka `SharePartition`.

mod seeds;

use broker::services::shares::state::{
    AckError, AckType, Limits, LogBatch, RecordState, SharePartition,
};
use std::collections::{BTreeMap, BTreeSet};

const SEEDS_DEFAULT: u64 = 300;
const STEPS_PER_SEED: usize = 400;
const MEMBERS: [&str; 3] = ["m0", "m1", "m2"];
const LOCK_MS: i64 = 1_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    state: RecordState,
    count: i16,
    holder: Option<&'static str>,
    deadline_ms: i64,
}

/// The plain model: every offset's state, the log's batches, what was accepted.
struct Model {
    log: Vec<LogBatch>,
    log_start: i64,
    start: i64,
    slots: BTreeMap<i64, Slot>,
    accepted: BTreeSet<i64>,
    archived: BTreeSet<i64>,
    limits: Limits,
}

impl Model {
    fn log_end(&self) -> i64 {
        self.log.last().map_or(0, |b| b.last_offset + 1)
    }

    fn deliverable(&self, offset: i64) -> bool {
        self.log.iter().any(|b| b.deliverable && b.base_offset <= offset && offset <= b.last_offset)
    }

    fn release(&mut self, offset: i64) {
        let limit = self.limits.delivery_count_limit;
        let slot = self.slots.get_mut(&offset).expect("released slot");
        slot.holder = None;
        if slot.count >= limit {
            slot.state = RecordState::Archived;
            self.archived.insert(offset);
        } else {
            slot.state = RecordState::Available;
        }
    }

    fn advance(&mut self) {
        loop {
            match self.slots.get(&self.start) {
                Some(slot) if slot.state.is_done() => {
                    self.slots.remove(&self.start);
                    self.start += 1;
                }
                _ => break,
            }
        }
    }

    /// The log's batches from `from` on, as a read returns them (the batch holding `from`
    /// first).
    fn read_from(&self, from: i64, batches_max: usize) -> Vec<LogBatch> {
        self.log.iter().filter(|b| b.last_offset >= from).take(batches_max).copied().collect()
    }
}

fn held_by(model: &Model, member: &str) -> Vec<i64> {
    model
        .slots
        .iter()
        .filter(|(_, s)| s.state == RecordState::Acquired && s.holder == Some(member))
        .map(|(o, _)| *o)
        .collect()
}

fn check_same(model: &Model, share: &SharePartition, seed: u64, step: usize) {
    share.check();
    assert_eq!(share.start_offset(), model.start, "seed {seed} step {step}: start offset");
    for offset in model.start..share.end() {
        let expected = model.slots.get(&offset);
        let got = share.state_of(offset);
        match expected {
            Some(slot) => assert_eq!(
                got,
                Some((slot.state, slot.count)),
                "seed {seed} step {step}: offset {offset}"
            ),
            None => assert!(
                got.is_some_and(|(state, _)| state == RecordState::Archived),
                "seed {seed} step {step}: offset {offset} is not in the log, got {got:?}"
            ),
        }
        if let Some(slot) = expected {
            assert_eq!(share.holder_of(offset), slot.holder, "seed {seed} step {step}: holder");
        }
    }
}

fn acquire(
    model: &mut Model,
    share: &mut SharePartition,
    rng: &mut Rng,
    now: i64,
    member: &'static str,
    seed: u64,
) -> usize {
    let Some(from) = share.next_fetch_offset() else {
        // The window is full and nothing in it is Available.
        let window_full = model.slots.values().all(|s| s.state != RecordState::Available);
        assert!(window_full, "seed {seed}: no fetch offset with records available");
        return 0;
    };
    let batches = model.read_from(from, 1 + rng.below(4) as usize);
    // Something deliverable, inside the window and Available (or never read) is within reach.
    let window_end = model.start + model.limits.record_locks_max;
    let reachable = batches.iter().any(|b| {
        b.deliverable
            && (b.base_offset.max(model.start)..=b.last_offset).any(|o| {
                o < window_end
                    && model.slots.get(&o).is_none_or(|s| s.state == RecordState::Available)
            })
    });
    let max_records = 1 + rng.below(40) as usize;
    let (acquired, holding) = share.acquire(member, &batches, max_records, now);
    let mut count = 0;
    for run in &acquired {
        for offset in run.first_offset..=run.last_offset {
            count += 1;
            assert!(model.deliverable(offset), "seed {seed}: acquired {offset}, not deliverable");
            assert!(
                !model.accepted.contains(&offset),
                "seed {seed}: {offset} accepted, acquired again"
            );
            assert!(
                !model.archived.contains(&offset),
                "seed {seed}: {offset} archived, acquired again"
            );
            assert!(offset >= model.start, "seed {seed}: {offset} below the start");
            assert!(
                offset < model.start + model.limits.record_locks_max,
                "seed {seed}: {offset} outside the window"
            );
            let slot = model.slots.entry(offset).or_insert(Slot {
                state: RecordState::Available,
                count: 0,
                holder: None,
                deadline_ms: 0,
            });
            assert_eq!(
                slot.state,
                RecordState::Available,
                "seed {seed}: {offset} was not available"
            );
            assert_eq!(
                run.delivery_count,
                slot.count + 1,
                "seed {seed}: {offset}'s delivery count"
            );
            assert!(
                run.delivery_count <= model.limits.delivery_count_limit,
                "seed {seed}: {offset} delivered {} times, past the limit {}",
                run.delivery_count,
                model.limits.delivery_count_limit
            );
            *slot = Slot {
                state: RecordState::Acquired,
                count: run.delivery_count,
                holder: Some(member),
                deadline_ms: now + model.limits.lock_ms,
            };
        }
    }
    // Every held batch holds an acquired offset.
    for index in &holding {
        let batch = batches[*index];
        assert!(acquired
            .iter()
            .any(|r| r.first_offset <= batch.last_offset && r.last_offset >= batch.base_offset));
    }
    // The window grew over every offset up to the last acquired, the ones not in the log and
    // markers archived.
    let end = share.end();
    for offset in model.start..end {
        if !model.slots.contains_key(&offset) {
            if model.deliverable(offset) {
                // Read but not acquired (MaxRecords or the window): Available, never delivered.
                model.slots.insert(
                    offset,
                    Slot { state: RecordState::Available, count: 0, holder: None, deadline_ms: 0 },
                );
            } else {
                model.slots.insert(
                    offset,
                    Slot { state: RecordState::Archived, count: 0, holder: None, deadline_ms: 0 },
                );
            }
        } else if !model.deliverable(offset) {
            let slot = model.slots.get_mut(&offset).expect("slot");
            if slot.state == RecordState::Available {
                slot.state = RecordState::Archived;
            }
        }
    }
    if reachable {
        assert!(count > 0, "seed {seed}: records within reach, none acquired from {from}");
    }
    model.advance();
    count
}

fn acknowledge(
    model: &mut Model,
    share: &mut SharePartition,
    rng: &mut Rng,
    member: &'static str,
    seed: u64,
) {
    let held = held_by(model, member);
    // A range of held offsets (or, sometimes, any range at all).
    let (first, last) = if !held.is_empty() && rng.chance(85) {
        let a = held[rng.below(held.len() as u64) as usize];
        let b = held[rng.below(held.len() as u64) as usize];
        (a.min(b), a.max(b))
    } else {
        let a = model.start + rng.below(30) as i64 - 3;
        (a, a + rng.below(5) as i64)
    };
    let kinds = [AckType::Accept, AckType::Release, AckType::Reject, AckType::Gap];
    let per_offset = rng.chance(40);
    let types: Vec<AckType> = if per_offset {
        (first..=last).map(|_| kinds[rng.below(4) as usize]).collect()
    } else {
        vec![kinds[rng.below(4) as usize]]
    };
    let valid = first >= 0
        && (first..=last).all(|o| {
            model
                .slots
                .get(&o)
                .is_some_and(|s| s.state == RecordState::Acquired && s.holder == Some(member))
        });
    let result = share.acknowledge_all(member, &[(first, last, &types)]);
    match (valid, &result) {
        (true, Ok(_)) => {}
        (false, Err(AckError::NotAcquired(_))) => return,
        _ => panic!("seed {seed}: ack {first}..={last} by {member}: valid {valid}, got {result:?}"),
    }
    for offset in first..=last {
        let kind = if types.len() == 1 { types[0] } else { types[(offset - first) as usize] };
        match kind {
            AckType::Accept => {
                assert!(model.accepted.insert(offset), "seed {seed}: {offset} accepted twice");
                let slot = model.slots.get_mut(&offset).expect("slot");
                slot.state = RecordState::Acknowledged;
                slot.holder = None;
            }
            AckType::Reject | AckType::Gap => {
                model.archived.insert(offset);
                let slot = model.slots.get_mut(&offset).expect("slot");
                slot.state = RecordState::Archived;
                slot.holder = None;
            }
            AckType::Release => model.release(offset),
        }
    }
    model.advance();
}

/// Appends a batch to the log (sometimes after a hole, sometimes a marker).
fn grow(model: &mut Model, rng: &mut Rng, end: &mut i64) {
    let hole = if rng.chance(15) { rng.below(3) as i64 } else { 0 };
    let base = *end + hole;
    let last = base + rng.below(6) as i64;
    let deliverable = !rng.chance(15);
    model.log.push(LogBatch { base_offset: base, last_offset: last, deliverable });
    *end = last + 1;
}

/// Every dead letter is an archived record's, never an accepted one's; and each archived record
/// (not a gap or a marker) is a dead letter exactly once (KIP-1191).
fn check_dead_letters(model: &Model, share: &mut SharePartition, seed: u64) {
    for letter in share.take_dead_letters() {
        assert!(model.archived.contains(&letter.offset), "seed {seed}: {letter:?} not archived");
        assert!(!model.accepted.contains(&letter.offset), "seed {seed}: {letter:?} accepted");
        assert!(letter.delivery_count >= 1, "seed {seed}: {letter:?} never delivered");
    }
}

fn run_seed(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let limits = Limits {
        delivery_count_limit: 2 + rng.below(4) as i16,
        lock_ms: LOCK_MS,
        record_locks_max: 5 + rng.below(60) as i64,
        dead_letters: true,
    };
    let initial = rng.below(20) as i64;
    let mut model = Model {
        log: Vec::new(),
        log_start: 0,
        start: initial,
        slots: BTreeMap::new(),
        accepted: BTreeSet::new(),
        archived: BTreeSet::new(),
        limits,
    };
    // The log up to the start offset exists already (the group starts part-way through).
    let mut end = 0i64;
    while end < initial + 5 {
        grow(&mut model, &mut rng, &mut end);
    }
    let mut share = SharePartition::new(initial, limits);
    let mut now: i64 = 0;
    for step in 0..STEPS_PER_SEED {
        let member = MEMBERS[rng.below(MEMBERS.len() as u64) as usize];
        match rng.below(100) {
            0..=14 => grow(&mut model, &mut rng, &mut end),
            15..=44 => {
                acquire(&mut model, &mut share, &mut rng, now, member, seed);
            }
            45..=74 => acknowledge(&mut model, &mut share, &mut rng, member, seed),
            75..=84 => {
                now += rng.below(LOCK_MS as u64 * 2) as i64;
                share.expire_locks(now);
                let expired: Vec<i64> = model
                    .slots
                    .iter()
                    .filter(|(_, s)| s.state == RecordState::Acquired && s.deadline_ms <= now)
                    .map(|(o, _)| *o)
                    .collect();
                for offset in expired {
                    model.release(offset);
                }
                model.advance();
            }
            85..=89 => {
                share.release_member(member);
                for offset in held_by(&model, member) {
                    model.release(offset);
                }
                model.advance();
            }
            90..=94 => {
                // A new leader: the persisted state, read back.
                share = SharePartition::restore(&share.persisted(), limits);
                for slot in model.slots.values_mut() {
                    if slot.state == RecordState::Acquired {
                        slot.state = RecordState::Available;
                        slot.holder = None;
                        slot.count -= 1;
                    }
                }
                // Trailing never-delivered slots are not persisted: the window may end earlier.
                let end_now = share.end();
                model.slots.retain(|offset, _| *offset < end_now);
                model.advance();
            }
            _ => {
                // Retention: the log loses its oldest batch.
                if model.log.len() > 2 && rng.chance(50) {
                    let removed = model.log.remove(0);
                    model.log_start =
                        model.log.first().map_or(removed.last_offset + 1, |b| b.base_offset);
                    share.log_starts_at(model.log_start);
                    while model.start < model.log_start {
                        model.slots.remove(&model.start);
                        model.start += 1;
                    }
                    model.slots.retain(|offset, _| *offset >= model.log_start);
                    model.advance();
                }
            }
        }
        check_same(&model, &share, seed, step);
        check_dead_letters(&model, &mut share, seed);
    }
    // Quiesce: everyone accepts what they get until nothing is left.
    let log_end = model.log_end();
    for round in 0..10_000 {
        if model.start >= log_end {
            break;
        }
        now += LOCK_MS * 3;
        share.expire_locks(now);
        for offset in model
            .slots
            .iter()
            .filter(|(_, s)| s.state == RecordState::Acquired)
            .map(|(o, _)| *o)
            .collect::<Vec<_>>()
        {
            model.release(offset);
        }
        model.advance();
        let member = MEMBERS[round % MEMBERS.len()];
        acquire(&mut model, &mut share, &mut rng, now, member, seed);
        let held = held_by(&model, member);
        if !held.is_empty() {
            for offset in held {
                share
                    .acknowledge_all(member, &[(offset, offset, &[AckType::Accept])])
                    .expect("accept");
                model.accepted.insert(offset);
                let slot = model.slots.get_mut(&offset).expect("slot");
                slot.state = RecordState::Acknowledged;
                slot.holder = None;
            }
            model.advance();
        }
        check_same(&model, &share, seed, STEPS_PER_SEED + round);
    }
    assert!(
        model.start >= log_end,
        "seed {seed}: the start offset {} never reached the log end {log_end}",
        model.start
    );
    for batch in &model.log {
        for offset in batch.base_offset.max(initial)..=batch.last_offset {
            if batch.deliverable && offset >= model.log_start {
                assert!(
                    model.accepted.contains(&offset) ^ model.archived.contains(&offset),
                    "seed {seed}: record {offset} neither accepted once nor archived"
                );
            }
        }
    }
}

#[test]
fn a_share_partition_follows_kip_932_s_rules_under_random_members_acks_timeouts_and_leader_changes()
{
    for seed in seeds::seeds("share_partition_model", SEEDS_DEFAULT) {
        let outcome = std::panic::catch_unwind(|| run_seed(seed));
        if let Err(panic) = outcome {
            panic!(
                "seed {seed} failed (replay: SEED={seed} cargo test -p broker --test share_partition_model): {}",
                seeds::panic_message(panic)
            );
        }
    }
}
