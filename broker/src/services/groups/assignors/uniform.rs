//! The `uniform` assignor: balance first, then stickiness against each member's current target.
//!
//! Both builders start alike: each member keeps, as owner of its slots, its current partitions
//! that still count (topic subscribed and existing, partition below the count, not claimed by
//! a member earlier in order).
//!
//! Homogeneous (every member subscribes to the same existing topics; Kafka's
//! `UniformHomogeneousAssignmentBuilder`): with `total` partitions and `members` members each
//! member's quota is `min = total / members`, and `total % members` of them get one more; a
//! member keeps its current partitions up to its quota (the lowest first) and releases the
//! rest; then the members short of their quota, in order, take the unowned partitions in
//! (topic, partition) order. So sizes differ by at most one and the quotas add up to `total`.
//! One departure from Kafka, which gives the extra ones to the first members it iterates:
//! they go first to members that already keep more than `min`, then to the others in order.
//! Still balanced, and stickier: a member holding `min + 1` is not made to give one up while
//! another takes one. With it, adding a member to a balanced group moves exactly the
//! newcomer's share, and removing one moves exactly its partitions.
//!
//! Heterogeneous (Kafka's `UniformHeterogeneousAssignmentBuilder` as reworked in KAFKA-17710):
//! loads are partitions held across all topics. Topics are taken most partitions per
//! subscriber first, then fewest subscribers, then topic id; each unowned partition of a topic,
//! lowest first, goes to its least-loaded subscriber (ties: member order), so the lowest load
//! level fills before any member rises above it. Then, for at most `BALANCE_PASSES_MAX` passes
//! over the topics with two or more subscribers (in the same order), stopping after a pass
//! that moves nothing: while the most-loaded subscriber owning a partition of the topic holds
//! at least two more partitions than the least-loaded subscriber, the first gives the second
//! its highest-numbered partition of the topic. Topics with one subscriber never move. Balance
//! is as good as the subscriptions allow within those passes, not guaranteed within one.
//! Runs on: whichever core the coordinator computes on.
//! References: Kafka `UniformAssignor.java`, `UniformHomogeneousAssignmentBuilder.java`,
//! `UniformHeterogeneousAssignmentBuilder.java`; KAFKA-17710.

use super::{answer, GroupSpec, Partitions, Topics, NO_OWNER};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// Balancing passes over the topics at most (heterogeneous builder), as Kafka bounds them.
const BALANCE_PASSES_MAX: usize = 16;

/// The uniform assignment of `spec` (module notes).
pub(super) fn assign(spec: &GroupSpec) -> BTreeMap<String, Partitions> {
    let order: Vec<usize> = (0..spec.members.len()).collect();
    let topics = Topics::new(spec, &order);
    let mut owners = vec![NO_OWNER; topics.total];
    let kept = keep_current(spec, &topics, &mut owners);
    if subscriptions_are_equal(&topics, spec.members.len()) {
        assign_homogeneous(&topics, &mut owners, &kept);
    } else {
        assign_heterogeneous(&topics, &mut owners, &kept);
    }
    debug_assert!(owners.iter().all(|&owner| owner != NO_OWNER), "every partition assigned");
    answer(spec, &topics, &owners)
}

/// Whether every member subscribes to every existing subscribed topic, so all subscribe to
/// the same ones (each topic of `topics` has a subscriber, so none subscribing to nothing).
fn subscriptions_are_equal(topics: &Topics, members: usize) -> bool {
    topics.subscribers.iter().all(|subscribers| subscribers.len() == members)
}

/// Makes each member the owner of its current partitions that still count (module notes);
/// returns their slots per member, ascending.
fn keep_current(spec: &GroupSpec, topics: &Topics, owners: &mut [usize]) -> Vec<Vec<usize>> {
    let mut kept = Vec::with_capacity(spec.members.len());
    for (member, spec_member) in spec.members.iter().enumerate() {
        let mut slots = Vec::new();
        for (id, partitions) in &spec_member.current {
            let Some(topic) = topics.index(id) else { continue };
            if !spec_member.topics.contains(id) {
                continue;
            }
            for &partition in partitions {
                let Some(slot) = topics.slot(topic, partition) else { continue };
                if owners[slot] == NO_OWNER {
                    owners[slot] = member;
                    slots.push(slot);
                }
            }
        }
        kept.push(slots);
    }
    kept
}

/// The homogeneous builder (module notes): trim each member to its quota, then fill the
/// members short of it from the unowned partitions.
fn assign_homogeneous(topics: &Topics, owners: &mut [usize], kept: &[Vec<usize>]) {
    let quotas = homogeneous_quotas(topics.total, kept);
    let mut short = Vec::with_capacity(kept.len());
    for (slots, &quota) in kept.iter().zip(&quotas) {
        for &slot in slots.iter().skip(quota) {
            owners[slot] = NO_OWNER;
        }
        short.push(quota.saturating_sub(slots.len()));
    }
    let unowned: Vec<usize> = (0..owners.len()).filter(|&slot| owners[slot] == NO_OWNER).collect();
    let mut unowned = unowned.into_iter();
    for (member, &missing) in short.iter().enumerate() {
        for slot in unowned.by_ref().take(missing) {
            owners[slot] = member;
        }
    }
    debug_assert!(unowned.next().is_none(), "the quotas add up to the partitions");
}

/// Each member's quota: `total / members`, and one more for `total % members` of them, first
/// for the members that keep more than that already (in order), then for the others in order.
fn homogeneous_quotas(total: usize, kept: &[Vec<usize>]) -> Vec<usize> {
    let Some(min) = total.checked_div(kept.len()) else { return Vec::new() };
    let mut extra = total - min * kept.len();
    let mut quotas = vec![min; kept.len()];
    for above_min in [true, false] {
        for (quota, slots) in quotas.iter_mut().zip(kept) {
            if extra > 0 && *quota == min && (slots.len() > min) == above_min {
                *quota += 1;
                extra -= 1;
            }
        }
    }
    quotas
}

/// The heterogeneous builder (module notes): hand out the unowned partitions topic by topic,
/// then balance.
fn assign_heterogeneous(topics: &Topics, owners: &mut [usize], kept: &[Vec<usize>]) {
    let mut loads: Vec<usize> = kept.iter().map(Vec::len).collect();
    let order = topic_order(topics);
    for &topic in &order {
        assign_unowned(topics, topic, owners, &mut loads);
    }
    let shared: Vec<usize> =
        order.into_iter().filter(|&topic| topics.subscribers[topic].len() >= 2).collect();
    let mut held: Vec<BinaryHeap<usize>> = vec![BinaryHeap::new(); loads.len()];
    for _ in 0..BALANCE_PASSES_MAX {
        let mut moves = 0;
        for &topic in &shared {
            moves += balance_topic(topics, topic, owners, &mut loads, &mut held);
        }
        if moves == 0 {
            break;
        }
    }
}

/// Topic indices in the heterogeneous builder's order: most partitions per subscriber first
/// (compared as cross products, exactly), then fewest subscribers, then topic id.
fn topic_order(topics: &Topics) -> Vec<usize> {
    let mut order: Vec<usize> = (0..topics.ids.len()).collect();
    order.sort_by(|&a, &b| {
        let (count_a, count_b) = (topics.counts[a] as u128, topics.counts[b] as u128);
        let subscribers_a = topics.subscribers[a].len() as u128;
        let subscribers_b = topics.subscribers[b].len() as u128;
        (count_b * subscribers_a)
            .cmp(&(count_a * subscribers_b))
            .then(subscribers_a.cmp(&subscribers_b))
            .then(a.cmp(&b))
    });
    order
}

/// Gives each unowned partition of `topic`, lowest first, to its least-loaded subscriber
/// (ties: member order).
fn assign_unowned(topics: &Topics, topic: usize, owners: &mut [usize], loads: &mut [usize]) {
    let slots = topics.slots(topic);
    if owners[slots.clone()].iter().all(|&owner| owner != NO_OWNER) {
        return;
    }
    let mut least: BinaryHeap<Reverse<(usize, usize)>> =
        topics.subscribers[topic].iter().map(|&member| Reverse((loads[member], member))).collect();
    for slot in slots {
        if owners[slot] != NO_OWNER {
            continue;
        }
        let Some(Reverse((load, member))) = least.pop() else { return };
        owners[slot] = member;
        loads[member] = load + 1;
        least.push(Reverse((load + 1, member)));
    }
}

/// One balancing turn over `topic` (module notes); returns the partitions it moved. `held` is
/// scratch space, one empty heap per member, left empty.
///
/// Only a move from a load at least two above the destination's is made: it lowers the sum of
/// the squared loads, so the turn ends; a move between loads one apart would only swap them.
fn balance_topic(
    topics: &Topics,
    topic: usize,
    owners: &mut [usize],
    loads: &mut [usize],
    held: &mut [BinaryHeap<usize>],
) -> usize {
    let subscribers = &topics.subscribers[topic];
    let slots = topics.slots(topic);
    let Some(load_min) = subscribers.iter().map(|&member| loads[member]).min() else { return 0 };
    let owner_load_max = owners[slots.clone()]
        .iter()
        .filter(|&&owner| owner != NO_OWNER)
        .map(|&owner| loads[owner])
        .max()
        .unwrap_or(0);
    if owner_load_max <= load_min + 1 {
        return 0;
    }
    for slot in slots {
        if let Some(heap) = held.get_mut(owners[slot]) {
            heap.push(slot);
        }
    }
    let moves = move_partitions(subscribers, owners, loads, held);
    for &member in subscribers {
        held[member].clear();
    }
    moves
}

/// Moves partitions of one topic (`held`: each subscriber's slots of it) from its most-loaded
/// owner (ties: member order) to its least-loaded subscriber (ties: member order), the highest
/// slot first, while their loads differ by two or more; returns the moves.
fn move_partitions(
    subscribers: &[usize],
    owners: &mut [usize],
    loads: &mut [usize],
    held: &mut [BinaryHeap<usize>],
) -> usize {
    let mut least: BTreeSet<(usize, usize)> =
        subscribers.iter().map(|&member| (loads[member], member)).collect();
    let mut most: BTreeSet<(usize, Reverse<usize>)> = subscribers
        .iter()
        .filter(|&&member| !held[member].is_empty())
        .map(|&member| (loads[member], Reverse(member)))
        .collect();
    let mut moves = 0;
    while let (Some(&(to_load, to)), Some(&(from_load, Reverse(from)))) =
        (least.first(), most.last())
    {
        if from_load <= to_load + 1 {
            break;
        }
        let Some(slot) = held[from].pop() else { break };
        least.remove(&(from_load, from));
        least.remove(&(to_load, to));
        least.insert((from_load - 1, from));
        least.insert((to_load + 1, to));
        most.remove(&(from_load, Reverse(from)));
        if !held[from].is_empty() {
            most.insert((from_load - 1, Reverse(from)));
        }
        most.remove(&(to_load, Reverse(to)));
        most.insert((to_load + 1, Reverse(to)));
        held[to].push(slot);
        loads[from] = from_load - 1;
        loads[to] = to_load + 1;
        owners[slot] = to;
        moves += 1;
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Assignor, GroupSpec, MemberSpec, Partitions};
    use std::collections::{BTreeMap, BTreeSet};

    fn uniform(spec: &GroupSpec) -> BTreeMap<String, Partitions> {
        let answer = Assignor::Uniform.assign(spec);
        assert_valid(spec, &answer);
        assert_eq!(answer, Assignor::Uniform.assign(&spec.clone()), "deterministic");
        answer
    }

    fn members(count: usize, topics: &[u8]) -> Vec<MemberSpec> {
        (0..count).map(|i| member(&format!("member-{i:02}"), topics)).collect()
    }

    fn partitions(answer: &BTreeMap<String, Partitions>, id: &str, n: u8) -> Vec<i32> {
        answer[id].get(&topic(n)).map(|set| set.iter().copied().collect()).unwrap_or_default()
    }

    fn spread(sizes: &[usize]) -> usize {
        sizes.iter().max().unwrap_or(&0) - sizes.iter().min().unwrap_or(&0)
    }

    #[test]
    fn a_fresh_homogeneous_group_is_balanced_and_filled_in_partition_order() {
        let spec = group(members(3, &[1, 2]), &[(1, 4), (2, 3)]);
        let answer = uniform(&spec);
        assert_eq!(sizes(&spec, &answer), [3, 2, 2]);
        assert_eq!(partitions(&answer, "member-00", 1), [0, 1, 2]);
        assert_eq!(partitions(&answer, "member-01", 1), [3]);
        assert_eq!(partitions(&answer, "member-01", 2), [0]);
        assert_eq!(partitions(&answer, "member-02", 2), [1, 2]);
    }

    #[test]
    fn homogeneous_sizes_differ_by_at_most_one() {
        for member_count in 1..12 {
            for partition_count in [0, 1, 5, 11, 12, 13, 40] {
                let spec = group(members(member_count, &[1, 2]), &[(1, partition_count), (2, 3)]);
                let answer = uniform(&spec);
                assert!(spread(&sizes(&spec, &answer)) <= 1, "{member_count} members");
                let again = uniform(&settled(&spec, &answer));
                assert_eq!(again, answer, "a settled group keeps its assignment");
            }
        }
    }

    #[test]
    fn adding_a_member_moves_only_the_newcomers_share() {
        for member_count in 1..9 {
            let spec = group(members(member_count, &[1, 2]), &[(1, 7), (2, 10)]);
            let before = uniform(&spec);
            let mut grown = settled(&spec, &before);
            grown.members.insert(member_count / 2, member("member-new", &[1, 2]));
            grown.members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
            let after = uniform(&grown);
            let moves = moves(&before, &after);
            let share = sizes(&grown, &after)
                [grown.members.iter().position(|m| m.member_id == "member-new").unwrap_or(0)];
            assert_eq!(moves.len(), share, "{member_count} members before");
            assert!(moves.iter().all(|(_, to)| to == "member-new"), "{moves:?}");
            assert!(spread(&sizes(&grown, &after)) <= 1);
        }
    }

    #[test]
    fn removing_a_member_moves_only_its_partitions() {
        for member_count in 2..10 {
            for leaving in 0..member_count {
                let spec = group(members(member_count, &[1, 2]), &[(1, 7), (2, 10)]);
                let before = uniform(&spec);
                let mut shrunk = settled(&spec, &before);
                let gone = shrunk.members.remove(leaving).member_id;
                let after = uniform(&shrunk);
                let moves = moves(&before, &after);
                let held: usize = before[&gone].values().map(BTreeSet::len).sum();
                assert_eq!(moves.len(), held, "{member_count} members, {gone} leaves");
                assert!(moves.iter().all(|(from, _)| *from == gone), "{moves:?}");
            }
        }
    }

    #[test]
    fn the_extra_partition_stays_with_a_member_that_already_holds_it() {
        // 7 partitions over 3 members: one of them gets 3. Kafka would give that one to
        // member-00 (iterated first), which takes one from member-02; here member-02, which
        // already holds 3, keeps them and nothing moves.
        let spec = group(
            vec![
                holding(member("member-00", &[1]), &[(1, &[0, 1])]),
                holding(member("member-01", &[1]), &[(1, &[2, 3])]),
                holding(member("member-02", &[1]), &[(1, &[4, 5, 6])]),
            ],
            &[(1, 7)],
        );
        let answer = uniform(&spec);
        assert_eq!(partitions(&answer, "member-00", 1), [0, 1]);
        assert_eq!(partitions(&answer, "member-01", 1), [2, 3]);
        assert_eq!(partitions(&answer, "member-02", 1), [4, 5, 6]);
    }

    #[test]
    fn deleted_shrunk_and_unsubscribed_topics_are_dropped_from_current_targets() {
        let spec = group(
            vec![
                holding(member("a", &[1, 2]), &[(1, &[0, 1, 5, 9]), (3, &[0]), (4, &[0])]),
                holding(member("b", &[1, 2]), &[(2, &[0, 1]), (1, &[-1])]),
            ],
            &[(1, 3), (2, 2), (4, 1)],
        );
        // a keeps 0 and 1 of topic 1 (5 and 9 are gone, topic 3 is deleted, 4 unsubscribed),
        // b keeps topic 2 (its -1 is no partition); of 5 partitions a's quota is the 3.
        let answer = uniform(&spec);
        assert_eq!(partitions(&answer, "a", 1), [0, 1, 2]);
        assert!(!answer["a"].contains_key(&topic(4)), "4 exists but is not subscribed");
        assert_eq!(partitions(&answer, "b", 2), [0, 1]);
        assert_eq!(partitions(&answer, "b", 1), Vec::<i32>::new());
    }

    #[test]
    fn a_partition_two_current_targets_claim_stays_with_the_first_member() {
        let spec = group(
            vec![
                holding(member("a", &[1]), &[(1, &[0, 1])]),
                holding(member("b", &[1]), &[(1, &[1, 2])]),
            ],
            &[(1, 4)],
        );
        let answer = uniform(&spec);
        assert_eq!(partitions(&answer, "a", 1), [0, 1]);
        assert_eq!(partitions(&answer, "b", 1), [2, 3]);
    }

    #[test]
    fn members_with_no_topics_get_nothing() {
        let spec = group(members(3, &[]), &[(1, 4)]);
        let answer = uniform(&spec);
        assert!(answer.values().all(BTreeMap::is_empty));
        let mixed = group(vec![member("a", &[]), member("b", &[1]), member("c", &[])], &[(1, 4)]);
        let answer = uniform(&mixed);
        assert_eq!(sizes(&mixed, &answer), [0, 4, 0]);
    }

    #[test]
    fn a_heterogeneous_group_never_gets_unsubscribed_topics_and_balances_what_it_can() {
        // member-00 alone reads topic 1 (6 partitions); all three read topic 2 (6 partitions).
        let spec = group(
            vec![
                member("member-00", &[1, 2]),
                member("member-01", &[2]),
                member("member-02", &[2]),
            ],
            &[(1, 6), (2, 6)],
        );
        let answer = uniform(&spec);
        assert_eq!(sizes(&spec, &answer), [6, 3, 3]);
        assert_eq!(partitions(&answer, "member-00", 1).len(), 6);
        assert!(!answer["member-00"].contains_key(&topic(2)), "its load is full from topic 1");
        let again = uniform(&settled(&spec, &answer));
        assert_eq!(again, answer, "a settled group keeps its assignment");
    }

    #[test]
    fn heterogeneous_balancing_moves_the_highest_partitions_to_the_least_loaded() {
        // member-00 holds all 8 partitions of topic 2; member-01 arrives reading 1 and 2.
        let spec = group(
            vec![
                holding(member("member-00", &[2]), &[(2, &[0, 1, 2, 3, 4, 5, 6, 7])]),
                member("member-01", &[1, 2]),
            ],
            &[(1, 2), (2, 8)],
        );
        let answer = uniform(&spec);
        assert_eq!(partitions(&answer, "member-01", 1), [0, 1]);
        assert_eq!(partitions(&answer, "member-00", 2), [0, 1, 2, 3, 4]);
        assert_eq!(partitions(&answer, "member-01", 2), [5, 6, 7]);
        assert_eq!(sizes(&spec, &answer), [5, 5]);
    }

    #[test]
    fn heterogeneous_topics_go_most_partitions_per_subscriber_first() {
        let spec = group(
            vec![member("a", &[1, 2]), member("b", &[1, 2]), member("c", &[2])],
            &[(1, 3), (2, 3)],
        );
        let topics = super::Topics::new(&spec, &[0, 1, 2]);
        // Topic 1: 3 / 2 per subscriber; topic 2: 3 / 3.
        assert_eq!(super::topic_order(&topics), [0, 1]);
        let answer = uniform(&spec);
        assert_eq!(sizes(&spec, &answer), [2, 2, 2]);
    }

    #[test]
    fn quotas_favour_members_above_the_minimum_then_member_order() {
        let kept = [vec![], vec![1, 2, 3], vec![4], vec![5, 6, 7]];
        assert_eq!(super::homogeneous_quotas(10, &kept), [2, 3, 2, 3]);
        assert_eq!(super::homogeneous_quotas(11, &kept), [3, 3, 2, 3]);
        assert_eq!(super::homogeneous_quotas(9, &kept), [2, 3, 2, 2]);
        assert!(super::homogeneous_quotas(5, &[]).is_empty());
    }
}
