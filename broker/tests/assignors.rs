//! Seeded tests of the KIP-848 server-side assignors (`broker::services::groups::assignors`),
//! which are pure: the same group spec always gives the same answer.
//!
//! A seeded randomized run builds random groups — members with and without instance ids,
//! equal and differing subscriptions, subscriptions to deleted topics, topics with no
//! partitions, current targets holding stale, unsubscribed, out-of-range and doubly claimed
//! partitions — and checks every assignor's answer against the invariants all of them keep
//! (every member answered; only subscribed existing topics, partitions in range; every
//! partition of a subscribed existing topic assigned exactly once; the same answer twice), then
//! per assignor:
//! - uniform, when every member subscribes to the same topics: sizes differ by at most one; a
//!   settled group (current targets = the answer) keeps its assignment; a member that joins
//!   takes exactly its share and nothing else moves; a member that leaves releases exactly its
//!   partitions and nothing else moves;
//! - range: the answer equals a plain model of Kafka's range assignor (so co-partitioned
//!   topics align).
//!
//! A failure names its seed; `SEED=<n> cargo test -p broker --test assignors` replays it and
//! `SEEDS=<count>` runs more seeds (the xorshift generator below is the test's own, so a seed
//! replays the same groups on every platform).
//!
//! `assignment_of_1000_members_and_10000_partitions` times each assignor on a large group,
//! homogeneous and heterogeneous, fresh and after a member joins or leaves. It prints the
//! milliseconds and asserts only correctness: performance is measured, not asserted, in timed
//! tests.
//! References: KIP-848; Kafka `UniformHomogeneousAssignmentBuilder.java`,
//! `UniformHeterogeneousAssignmentBuilder.java`, `RangeAssignor.java`.

mod seeds;

use broker::services::groups::assignors::{Assignor, GroupSpec, MemberSpec, Partitions, TopicId};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::time::Instant;

const SEEDS_DEFAULT: u64 = 300;
/// Random groups checked per seed.
const GROUPS_PER_SEED: usize = 8;

type Answer = BTreeMap<String, Partitions>;

/// xorshift64, seeded through splitmix64 so that neighbouring seeds give unrelated streams and
/// the state is never zero.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..bound` (0 when `bound` is 0).
    fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn topic_id(&mut self) -> TopicId {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        id[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        id
    }

    /// Each of `ids` with even chance.
    fn subset(&mut self, ids: &[TopicId]) -> BTreeSet<TopicId> {
        ids.iter().filter(|_| self.chance(50)).copied().collect()
    }
}

/// A random group (module notes). Some of its topics do not exist (they are not in
/// `partition_counts`), as when a topic was deleted.
fn random_group(rng: &mut Rng) -> GroupSpec {
    let mut ids = BTreeSet::new();
    for _ in 0..1 + rng.below(6) {
        ids.insert(rng.topic_id());
    }
    let ids: Vec<TopicId> = ids.into_iter().collect();
    let mut partition_counts = BTreeMap::new();
    for id in &ids {
        if !rng.chance(15) {
            partition_counts.insert(*id, rng.below(13) as i32);
        }
    }
    let shared = if rng.chance(40) { Some(rng.subset(&ids)) } else { None };
    let member_count = rng.below(10) as usize;
    let mut names = BTreeSet::new();
    while names.len() < member_count {
        names.insert(format!("member-{:04}", rng.below(10_000)));
    }
    let mut members = Vec::new();
    for (index, member_id) in names.into_iter().enumerate() {
        // Unique per group: 7 and 10 are coprime and there are fewer than 10 members.
        let instance_id = rng.chance(30).then(|| format!("instance-{}", (index * 7) % 10));
        let topics = match &shared {
            Some(topics) => topics.clone(),
            None => rng.subset(&ids),
        };
        let current = random_current(rng, &ids, &partition_counts);
        members.push(MemberSpec { member_id, instance_id, topics, current });
    }
    GroupSpec { members, partition_counts }
}

/// A current target with partitions of any topic (subscribed or not, existing or not),
/// partition numbers from -1 to past the count.
fn random_current(rng: &mut Rng, ids: &[TopicId], counts: &BTreeMap<TopicId, i32>) -> Partitions {
    let mut current = Partitions::new();
    if rng.chance(30) {
        return current;
    }
    for id in ids {
        if rng.chance(50) {
            continue;
        }
        let count = counts.get(id).copied().unwrap_or(4).max(0) as u64;
        let mut partitions = BTreeSet::new();
        for _ in 0..rng.below(count + 3) {
            partitions.insert(rng.below(count + 3) as i32 - 1);
        }
        if !partitions.is_empty() {
            current.insert(*id, partitions);
        }
    }
    current
}

/// Asserts the invariants every assignor keeps.
fn assert_valid(spec: &GroupSpec, answer: &Answer, assignor: Assignor) {
    let name = assignor.name();
    assert_eq!(answer.len(), spec.members.len(), "{name}: one entry per member");
    let mut owners = BTreeMap::new();
    for member in &spec.members {
        let id = &member.member_id;
        let assigned = answer.get(id).unwrap_or_else(|| panic!("{name}: {id} is answered"));
        for (topic, partitions) in assigned {
            assert!(member.topics.contains(topic), "{name}: {id} got a topic it does not read");
            assert!(!partitions.is_empty(), "{name}: {id} got an empty set of partitions");
            let count = spec.partition_counts.get(topic).copied();
            let count = count.unwrap_or_else(|| panic!("{name}: {id} got a deleted topic"));
            for &partition in partitions {
                assert!((0..count).contains(&partition), "{name}: {id} got {partition} of {count}");
                let before = owners.insert((*topic, partition), id.clone());
                assert_eq!(before, None, "{name}: partition {partition} assigned twice");
            }
        }
    }
    for (topic, &count) in &spec.partition_counts {
        if spec.members.iter().any(|member| member.topics.contains(topic)) {
            for partition in 0..count {
                let owned = owners.contains_key(&(*topic, partition));
                assert!(owned, "{name}: partition {partition} of a subscribed topic unassigned");
            }
        }
    }
}

/// Partitions per member, in the spec's order.
fn sizes(spec: &GroupSpec, answer: &Answer) -> Vec<usize> {
    spec.members
        .iter()
        .map(|member| answer[&member.member_id].values().map(BTreeSet::len).sum())
        .collect()
}

fn spread(sizes: &[usize]) -> usize {
    let max = sizes.iter().copied().max().unwrap_or(0);
    max - sizes.iter().copied().min().unwrap_or(0)
}

/// `spec` with each member's answer as its current target.
fn settled(spec: &GroupSpec, answer: &Answer) -> GroupSpec {
    let mut spec = spec.clone();
    for member in &mut spec.members {
        member.current = answer[&member.member_id].clone();
    }
    spec
}

/// Every partition that changed hands between two answers: (from, to).
fn moves(before: &Answer, after: &Answer) -> Vec<(String, String)> {
    let owners = |answer: &Answer| {
        let mut owners = BTreeMap::new();
        for (member, partitions) in answer {
            for (topic, set) in partitions {
                for &partition in set {
                    owners.insert((*topic, partition), member.clone());
                }
            }
        }
        owners
    };
    let after = owners(after);
    owners(before)
        .into_iter()
        .filter_map(|(key, from)| match after.get(&key) {
            Some(to) if *to != from => Some((from, to.clone())),
            _ => None,
        })
        .collect()
}

/// The topics every member subscribes to, when all subscribe to the same existing ones (the
/// uniform assignor's homogeneous case); None for an empty group.
fn shared_subscription(spec: &GroupSpec) -> Option<BTreeSet<TopicId>> {
    let existing = |member: &MemberSpec| -> BTreeSet<TopicId> {
        member.topics.iter().filter(|id| spec.partition_counts.contains_key(*id)).copied().collect()
    };
    let first = spec.members.first()?;
    let all_equal = spec.members.iter().all(|member| existing(member) == existing(first));
    all_equal.then(|| first.topics.clone())
}

/// Kafka's range assignor, plainly: members with an instance id first (by it), then the
/// others by member id; per topic, its subscribers in that order take contiguous ranges, the
/// first `count % subscribers` one partition more.
fn range_model(spec: &GroupSpec) -> Answer {
    let mut order: Vec<&MemberSpec> = spec.members.iter().collect();
    order.sort_by(|a, b| match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    });
    let mut answer: Answer =
        spec.members.iter().map(|m| (m.member_id.clone(), Partitions::new())).collect();
    for (topic, &count) in &spec.partition_counts {
        let subscribers: Vec<&str> = order
            .iter()
            .filter(|member| member.topics.contains(topic))
            .map(|member| member.member_id.as_str())
            .collect();
        let mut next = 0;
        for (place, id) in subscribers.iter().enumerate() {
            let n = subscribers.len() as i32;
            let share = count / n + i32::from((place as i32) < count % n);
            if share > 0 {
                let assigned = answer.get_mut(*id).expect("a member");
                assigned.insert(*topic, (next..next + share).collect());
            }
            next += share;
        }
    }
    answer
}

/// The uniform assignor on a group whose members all read `topics`: balanced, settled,
/// joined, left (module notes).
fn check_uniform_homogeneous(spec: &GroupSpec, topics: &BTreeSet<TopicId>, rng: &mut Rng) {
    let uniform = Assignor::Uniform;
    let answer = uniform.assign(spec);
    assert!(spread(&sizes(spec, &answer)) <= 1, "uniform: sizes {:?}", sizes(spec, &answer));
    let settled = settled(spec, &answer);
    assert_eq!(uniform.assign(&settled), answer, "uniform: a settled group keeps its assignment");

    let mut grown = settled.clone();
    let newcomer = loop {
        let id = format!("member-{:04}", rng.below(10_000));
        if !grown.members.iter().any(|member| member.member_id == id) {
            break id;
        }
    };
    grown.members.push(MemberSpec {
        member_id: newcomer.clone(),
        instance_id: None,
        topics: topics.clone(),
        current: Partitions::new(),
    });
    grown.members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    let after = uniform.assign(&grown);
    assert_valid(&grown, &after, uniform);
    let moved = moves(&answer, &after);
    let share: usize = after[&newcomer].values().map(BTreeSet::len).sum();
    assert_eq!(moved.len(), share, "uniform: a join moves the newcomer's share: {moved:?}");
    assert!(moved.iter().all(|(_, to)| *to == newcomer), "uniform: moves go to the newcomer");
    assert!(spread(&sizes(&grown, &after)) <= 1, "uniform: balanced after a join");

    if settled.members.len() >= 2 {
        let mut shrunk = settled;
        let leaving = rng.below(shrunk.members.len() as u64) as usize;
        let gone = shrunk.members.remove(leaving).member_id;
        let after = uniform.assign(&shrunk);
        assert_valid(&shrunk, &after, uniform);
        let moved = moves(&answer, &after);
        let held: usize = answer[&gone].values().map(BTreeSet::len).sum();
        assert_eq!(moved.len(), held, "uniform: a leave moves only {gone}'s partitions");
        assert!(moved.iter().all(|(from, _)| *from == gone), "uniform: {moved:?}");
        assert!(spread(&sizes(&shrunk, &after)) <= 1, "uniform: balanced after a leave");
    }
}

fn check_group(spec: &GroupSpec, rng: &mut Rng) {
    for assignor in Assignor::ALL {
        let answer = assignor.assign(spec);
        assert_valid(spec, &answer, assignor);
        let again = assignor.assign(&spec.clone());
        assert_eq!(again, answer, "{}: the same group, the same answer", assignor.name());
    }
    assert_eq!(Assignor::Range.assign(spec), range_model(spec), "range: Kafka's ranges");
    if let Some(topics) = shared_subscription(spec) {
        check_uniform_homogeneous(spec, &topics, rng);
    }
}

fn check_seed(seed: u64) {
    let mut rng = Rng::new(seed);
    for round in 0..GROUPS_PER_SEED {
        let spec = random_group(&mut rng);
        let checked = std::panic::catch_unwind(AssertUnwindSafe(|| check_group(&spec, &mut rng)));
        if let Err(panic) = checked {
            panic!("group {round}: {}\n{spec:#?}", seeds::panic_message(panic));
        }
    }
}

#[test]
fn random_groups_keep_every_assignors_invariants() {
    for seed in seeds::seeds("random_groups_keep_every_assignors_invariants", SEEDS_DEFAULT) {
        if let Err(panic) = std::panic::catch_unwind(move || check_seed(seed)) {
            panic!(
                "seed {seed} failed: {}\nreplay with: SEED={seed} cargo test -p broker --test \
                 assignors",
                seeds::panic_message(panic)
            );
        }
    }
}

#[test]
fn assignors_are_named_as_kafka_names_them() {
    assert_eq!(Assignor::ALL.map(Assignor::name), ["uniform", "range"]);
    for assignor in Assignor::ALL {
        assert_eq!(Assignor::from_name(assignor.name()), Some(assignor));
    }
    assert_eq!(Assignor::from_name("cooperative-sticky"), None);
}

/// Topic `n` of the large group.
fn numbered_topic(n: usize) -> TopicId {
    let mut id = [0u8; 16];
    id[8..].copy_from_slice(&(n as u64).to_be_bytes());
    id
}

/// 1,000 members and 100 topics of 100 partitions; member `m` reads topic `t` when
/// `reads(m, t)`.
fn large_group(reads: impl Fn(usize, usize) -> bool) -> GroupSpec {
    let partition_counts = (0..100).map(|t| (numbered_topic(t), 100)).collect();
    let members = (0..1000)
        .map(|m| MemberSpec {
            member_id: format!("member-{m:04}"),
            instance_id: None,
            topics: (0..100).filter(|&t| reads(m, t)).map(numbered_topic).collect(),
            current: Partitions::new(),
        })
        .collect();
    GroupSpec { members, partition_counts }
}

fn timed<T>(run: impl FnOnce() -> T) -> (T, f64) {
    let started = Instant::now();
    let value = run();
    (value, started.elapsed().as_secs_f64() * 1000.0)
}

#[test]
fn assignment_of_1000_members_and_10000_partitions() {
    let build = if cfg!(debug_assertions) { "debug build" } else { "release build" };
    let shapes = [
        ("homogeneous", large_group(|_, _| true)),
        // Each member reads two topics in three.
        ("heterogeneous", large_group(|m, t| (m + t) % 3 < 2)),
    ];
    for (shape, spec) in &shapes {
        for assignor in Assignor::ALL {
            let name = assignor.name();
            let (answer, fresh_ms) = timed(|| assignor.assign(spec));
            assert_valid(spec, &answer, assignor);
            let settled = settled(spec, &answer);

            let mut grown = settled.clone();
            let mut newcomer = grown.members[0].clone();
            newcomer.member_id = "member-0499b".to_string();
            newcomer.current = Partitions::new();
            grown.members.insert(500, newcomer);
            let (joined, join_ms) = timed(|| assignor.assign(&grown));
            assert_valid(&grown, &joined, assignor);

            let mut shrunk = settled;
            shrunk.members.remove(500);
            let (left, leave_ms) = timed(|| assignor.assign(&shrunk));
            assert_valid(&shrunk, &left, assignor);

            if *shape == "homogeneous" && assignor == Assignor::Uniform {
                assert!(spread(&sizes(spec, &answer)) <= 1);
                assert!(spread(&sizes(&grown, &joined)) <= 1);
                assert!(spread(&sizes(&shrunk, &left)) <= 1);
                assert_eq!(moves(&answer, &left).len(), 10, "only the leaver's partitions move");
            }
            eprintln!(
                "{name}, {shape}, 1000 members x 10000 partitions ({build}): fresh {fresh_ms:.2} \
                 ms, a member joins {join_ms:.2} ms, a member leaves {leave_ms:.2} ms"
            );
        }
    }
}
