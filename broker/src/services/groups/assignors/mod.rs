//! The server-side partition assignors of KIP-848 consumer groups: from the members, their
//! subscriptions and current target assignments, and the partition counts of the subscribed
//! topics, each member's new target assignment.
//!
//! Pure and deterministic: no I/O, no clock, no hash order. Where Kafka iterates a hash map,
//! these iterate members in the order the `GroupSpec` lists them (member id order) and topics
//! in `TopicId` order, so the same spec always gives the same answer and a seeded model test
//! replays. Input and output are `Send`, so the coordinator may compute a large group off its
//! shard.
//!
//! The assignors Kafka 4.x offers (`group.consumer.assignors`, `uniform` first):
//! - `uniform` (`uniform.rs`): balanced, then sticky. Kafka's `UniformAssignor`: the
//!   homogeneous builder when every member subscribes to the same topics, else the
//!   heterogeneous one as reworked in KAFKA-17710;
//! - `range` (`range.rs`): contiguous ranges per topic, co-partitioned topics aligned, sticky
//!   only through instance ids; Kafka's server `RangeAssignor` after KAFKA-16944.
//!
//! Invariants of every answer (`tests/assignors.rs` checks them over random groups):
//! 1. every member of the spec appears, possibly with an empty assignment (and never with an
//!    empty set of partitions under a topic);
//! 2. a member gets only partitions of topics it subscribes to that exist (are in
//!    `partition_counts`), numbered from 0 to below the topic's count;
//! 3. every partition of an existing topic with at least one subscriber is assigned to exactly
//!    one member.
//!
//! A member's current partitions that no longer exist (the topic was deleted or has fewer
//! partitions) or whose topic it no longer subscribes to are dropped; should two current
//! targets claim one partition, the first member in order keeps it. A negative partition count
//! counts as 0.
//! Internally a partition is a slot (`Topics`) in one flat table of owners (member indices),
//! so nothing is hashed or keyed by a string per partition; an assignment of 1,000 members to
//! 10,000 partitions takes milliseconds.
//! Runs on: whichever core the coordinator computes on; no shared state.
//! References: KIP-848 ("Assignors"); Kafka `group-coordinator/src/main/java/org/apache/kafka/
//! coordinator/group/assignor/{UniformAssignor,UniformHomogeneousAssignmentBuilder,
//! UniformHeterogeneousAssignmentBuilder,RangeAssignor}.java`, KAFKA-16944, KAFKA-17710.

mod range;
mod uniform;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

pub type TopicId = [u8; 16];
/// Partitions by topic: an assignment.
pub type Partitions = BTreeMap<TopicId, BTreeSet<i32>>;

/// A member as an assignor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpec {
    pub member_id: String,
    pub instance_id: Option<String>,
    /// Topics it subscribes to that exist (ids).
    pub topics: BTreeSet<TopicId>,
    /// Its current target assignment (stickiness is against this).
    pub current: Partitions,
}

/// The group's input: members in member-id order, partition counts of every subscribed topic
/// that exists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupSpec {
    pub members: Vec<MemberSpec>,
    pub partition_counts: BTreeMap<TopicId, i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    pub const ALL: [Assignor; 2] = [Assignor::Uniform, Assignor::Range];

    /// The name clients send as `ServerAssignor` (Kafka's names).
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// The assignor named exactly `name`.
    pub fn from_name(name: &str) -> Option<Assignor> {
        Assignor::ALL.into_iter().find(|assignor| assignor.name() == name)
    }

    /// The new target assignment of every member (every member of the spec appears in the
    /// result, possibly with an empty assignment; a member never gets a topic it does not
    /// subscribe to; every partition of a subscribed existing topic is assigned to exactly one
    /// subscriber when the topic has subscribers).
    pub fn assign(self, spec: &GroupSpec) -> BTreeMap<String, Partitions> {
        match self {
            Assignor::Uniform => uniform::assign(spec),
            Assignor::Range => range::assign(spec),
        }
    }
}

/// The owner of a slot no member owns (yet).
const NO_OWNER: usize = usize::MAX;

/// The topics an assignment spans — those that exist and that at least one member subscribes
/// to — in `TopicId` order, each with its subscribers and its slots in the table of owners:
/// partition `p` of the topic at index `t` is slot `bases[t] + p`. Slots in ascending order are
/// partitions in (topic id, partition) order.
struct Topics {
    ids: Vec<TopicId>,
    counts: Vec<usize>,
    bases: Vec<usize>,
    /// Indices (into `GroupSpec::members`) of each topic's subscribers, in the order given to
    /// `Topics::new`; never empty.
    subscribers: Vec<Vec<usize>>,
    /// The number of slots: the partitions of all the topics.
    total: usize,
}

impl Topics {
    /// The existing topics `spec`'s members subscribe to, each one's subscribers listed in
    /// `order` (a permutation of the member indices).
    fn new(spec: &GroupSpec, order: &[usize]) -> Topics {
        let existing: Vec<(TopicId, usize)> = spec
            .partition_counts
            .iter()
            .map(|(id, &count)| (*id, usize::try_from(count).unwrap_or(0)))
            .collect();
        let mut subscribers: Vec<Vec<usize>> = vec![Vec::new(); existing.len()];
        for &member in order {
            for id in &spec.members[member].topics {
                if let Ok(at) = existing.binary_search_by(|(other, _)| other.cmp(id)) {
                    subscribers[at].push(member);
                }
            }
        }
        let mut topics = Topics {
            ids: Vec::new(),
            counts: Vec::new(),
            bases: Vec::new(),
            subscribers: Vec::new(),
            total: 0,
        };
        for ((id, count), members) in existing.into_iter().zip(subscribers) {
            if members.is_empty() {
                continue;
            }
            topics.ids.push(id);
            topics.counts.push(count);
            topics.bases.push(topics.total);
            topics.subscribers.push(members);
            topics.total += count;
        }
        topics
    }

    /// The index of topic `id`, if it is one of these.
    fn index(&self, id: &TopicId) -> Option<usize> {
        self.ids.binary_search(id).ok()
    }

    /// The slot of `partition` of the topic at index `topic`, if the topic has that partition.
    fn slot(&self, topic: usize, partition: i32) -> Option<usize> {
        let partition = usize::try_from(partition).ok()?;
        (partition < self.counts[topic]).then_some(self.bases[topic] + partition)
    }

    /// The slots of the topic at index `topic`, partition 0 first.
    fn slots(&self, topic: usize) -> Range<usize> {
        self.bases[topic]..self.bases[topic] + self.counts[topic]
    }
}

/// The answer: every member of `spec`, with the partitions whose slots it owns in `owners`.
/// Each member's partitions of a topic are gathered in one list, so each set is built once,
/// from sorted input.
fn answer(spec: &GroupSpec, topics: &Topics, owners: &[usize]) -> BTreeMap<String, Partitions> {
    let mut assigned: Vec<Partitions> = vec![Partitions::new(); spec.members.len()];
    let mut gathered: Vec<Vec<i32>> = vec![Vec::new(); spec.members.len()];
    let mut touched: Vec<usize> = Vec::new();
    for (topic, id) in topics.ids.iter().enumerate() {
        for (partition, &owner) in (0..).zip(&owners[topics.slots(topic)]) {
            // `NO_OWNER` is no member: the slot stays unassigned.
            let Some(list) = gathered.get_mut(owner) else { continue };
            if list.is_empty() {
                touched.push(owner);
            }
            list.push(partition);
        }
        for &member in &touched {
            assigned[member].insert(*id, gathered[member].drain(..).collect());
        }
        touched.clear();
    }
    debug_assert!(
        spec.members.windows(2).all(|pair| pair[0].member_id != pair[1].member_id),
        "member ids are unique"
    );
    spec.members
        .iter()
        .zip(assigned)
        .map(|(member, partitions)| (member.member_id.clone(), partitions))
        .collect()
}

#[cfg(test)]
mod testing {
    //! Builders and checks shared by the assignors' unit tests.

    use super::*;

    /// Topic `n`'s id (ids order as their numbers).
    pub(super) fn topic(n: u8) -> TopicId {
        [n; 16]
    }

    /// A dynamic member subscribed to `topics`, with no current assignment.
    pub(super) fn member(id: &str, topics: &[u8]) -> MemberSpec {
        MemberSpec {
            member_id: id.to_string(),
            instance_id: None,
            topics: topics.iter().map(|&n| topic(n)).collect(),
            current: Partitions::new(),
        }
    }

    /// `member` with `current` as its current target.
    pub(super) fn holding(mut member: MemberSpec, current: &[(u8, &[i32])]) -> MemberSpec {
        for (n, partitions) in current {
            member.current.entry(topic(*n)).or_default().extend(partitions.iter().copied());
        }
        member
    }

    pub(super) fn group(members: Vec<MemberSpec>, counts: &[(u8, i32)]) -> GroupSpec {
        GroupSpec {
            members,
            partition_counts: counts.iter().map(|&(n, count)| (topic(n), count)).collect(),
        }
    }

    /// `spec` with each member's answer as its current target.
    pub(super) fn settled(spec: &GroupSpec, answer: &BTreeMap<String, Partitions>) -> GroupSpec {
        let mut spec = spec.clone();
        for member in &mut spec.members {
            member.current = answer[&member.member_id].clone();
        }
        spec
    }

    /// The number of partitions each member got, in the spec's order.
    pub(super) fn sizes(spec: &GroupSpec, answer: &BTreeMap<String, Partitions>) -> Vec<usize> {
        spec.members
            .iter()
            .map(|m| answer[&m.member_id].values().map(BTreeSet::len).sum())
            .collect()
    }

    /// Every partition that changed hands: (from, to).
    pub(super) fn moves(
        before: &BTreeMap<String, Partitions>,
        after: &BTreeMap<String, Partitions>,
    ) -> Vec<(String, String)> {
        let owners = |answer: &BTreeMap<String, Partitions>| {
            let mut owners = BTreeMap::new();
            for (member, partitions) in answer {
                for (topic, set) in partitions {
                    for &p in set {
                        owners.insert((*topic, p), member.clone());
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

    /// Asserts the invariants every answer keeps (module notes 1–3).
    pub(super) fn assert_valid(spec: &GroupSpec, answer: &BTreeMap<String, Partitions>) {
        assert_eq!(answer.len(), spec.members.len(), "one entry per member");
        let mut owners = BTreeMap::new();
        for member in &spec.members {
            let assigned = &answer[&member.member_id];
            for (topic, partitions) in assigned {
                assert!(
                    member.topics.contains(topic),
                    "{} got an unsubscribed topic",
                    member.member_id
                );
                assert!(!partitions.is_empty(), "no empty partition sets");
                let count = spec.partition_counts[topic];
                for &p in partitions {
                    assert!((0..count).contains(&p), "partition {p} of {count}");
                    let before = owners.insert((*topic, p), member.member_id.clone());
                    assert_eq!(before, None, "partition {p} assigned twice");
                }
            }
        }
        for (topic, &count) in &spec.partition_counts {
            if spec.members.iter().any(|m| m.topics.contains(topic)) {
                for p in 0..count {
                    assert!(owners.contains_key(&(*topic, p)), "partition {p} unassigned");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn names_round_trip_and_only_exact_names_are_known() {
        for assignor in Assignor::ALL {
            assert_eq!(Assignor::from_name(assignor.name()), Some(assignor));
        }
        assert_eq!(Assignor::ALL.map(Assignor::name), ["uniform", "range"]);
        assert_eq!(Assignor::from_name("Uniform"), None);
        assert_eq!(Assignor::from_name("range "), None);
        assert_eq!(Assignor::from_name(""), None);
    }

    #[test]
    fn an_empty_group_gets_an_empty_answer() {
        for assignor in Assignor::ALL {
            assert!(assignor.assign(&GroupSpec::default()).is_empty());
            let spec = group(Vec::new(), &[(1, 4)]);
            assert!(assignor.assign(&spec).is_empty());
        }
    }

    #[test]
    fn slots_cover_only_subscribed_existing_topics_in_id_order() {
        let spec = group(
            vec![member("a", &[3, 1, 9]), member("b", &[1])],
            &[(1, 2), (2, 5), (3, 3), (4, -1)],
        );
        let topics = Topics::new(&spec, &[0, 1]);
        assert_eq!(topics.ids, [topic(1), topic(3)], "2 has no subscriber, 9 does not exist");
        assert_eq!(topics.subscribers, [vec![0usize, 1], vec![0]]);
        assert_eq!(topics.total, 5);
        assert_eq!(topics.slot(1, 2), Some(4));
        assert_eq!(topics.slot(1, 3), None);
        assert_eq!(topics.slot(0, -1), None);
        assert_eq!(topics.slots(1), 2..5);
        let reversed = Topics::new(&spec, &[1, 0]);
        assert_eq!(
            reversed.subscribers,
            [vec![1usize, 0], vec![0]],
            "subscribers in the given order"
        );
    }

    #[test]
    fn the_answer_lists_every_member_and_no_unowned_slot() {
        let spec = group(vec![member("a", &[1]), member("b", &[1]), member("c", &[])], &[(1, 3)]);
        let topics = Topics::new(&spec, &[0, 1, 2]);
        let got = answer(&spec, &topics, &[1, NO_OWNER, 1]);
        assert_eq!(got.len(), 3);
        assert!(got["a"].is_empty());
        assert_eq!(got["b"][&topic(1)], BTreeSet::from([0, 2]));
        assert!(got["c"].is_empty());
    }
}
