//! The `range` assignor: each topic's partitions in contiguous ranges over its subscribers.
//!
//! Members are ordered with those that have an instance id (static members, KIP-345) first,
//! by instance id, then the others by member id. For each topic, over its subscribers in that
//! order, with `P` partitions and `n` subscribers: every subscriber gets the next `P / n`
//! partitions, and the first `P % n` of them one more. So co-partitioned topics (the same
//! subscribers, the same partition count) give every member the same partition numbers, which
//! joins across topics rely on. It is recomputed from scratch each time: the current targets
//! play no part, and a static member that comes back under a new member id gets its range
//! back because its place in the order is its instance id's.
//! Runs on: whichever core the coordinator computes on.
//! References: Kafka `RangeAssignor.java` (server side, as rewritten in KAFKA-16944), KIP-345.

use super::{answer, GroupSpec, MemberSpec, Partitions, Topics, NO_OWNER};
use std::collections::BTreeMap;

/// The range assignment of `spec` (module notes).
pub(super) fn assign(spec: &GroupSpec) -> BTreeMap<String, Partitions> {
    let order = member_order(spec);
    let topics = Topics::new(spec, &order);
    let mut owners = vec![NO_OWNER; topics.total];
    for (topic, subscribers) in topics.subscribers.iter().enumerate() {
        let slots = topics.slots(topic);
        let Some(min) = slots.len().checked_div(subscribers.len()) else { continue };
        let extra = slots.len() - min * subscribers.len();
        let mut next = slots.start;
        for (place, &member) in subscribers.iter().enumerate() {
            let share = min + usize::from(place < extra);
            owners[next..next + share].fill(member);
            next += share;
        }
        debug_assert_eq!(next, slots.end, "the ranges cover the topic");
    }
    answer(spec, &topics, &owners)
}

/// Member indices in range order: members with an instance id first, by instance id, then
/// the others by member id.
fn member_order(spec: &GroupSpec) -> Vec<usize> {
    let mut order: Vec<usize> = (0..spec.members.len()).collect();
    order.sort_by(|&a, &b| order_key(&spec.members[a]).cmp(&order_key(&spec.members[b])));
    order
}

/// A member's place in range order: static members (false) before dynamic ones (true).
fn order_key(member: &MemberSpec) -> (bool, Option<&str>, &str) {
    (member.instance_id.is_none(), member.instance_id.as_deref(), &member.member_id)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Assignor, GroupSpec, Partitions};
    use std::collections::BTreeMap;

    fn range(spec: &GroupSpec) -> BTreeMap<String, Partitions> {
        let answer = Assignor::Range.assign(spec);
        assert_valid(spec, &answer);
        assert_eq!(answer, Assignor::Range.assign(&spec.clone()), "deterministic");
        answer
    }

    fn partitions(answer: &BTreeMap<String, Partitions>, id: &str, n: u8) -> Vec<i32> {
        answer[id].get(&topic(n)).map(|set| set.iter().copied().collect()).unwrap_or_default()
    }

    #[test]
    fn each_subscriber_gets_a_contiguous_range_and_the_first_ones_the_remainder() {
        let spec = group(vec![member("a", &[1]), member("b", &[1]), member("c", &[1])], &[(1, 8)]);
        let answer = range(&spec);
        assert_eq!(partitions(&answer, "a", 1), [0, 1, 2]);
        assert_eq!(partitions(&answer, "b", 1), [3, 4, 5]);
        assert_eq!(partitions(&answer, "c", 1), [6, 7]);
    }

    #[test]
    fn co_partitioned_topics_give_each_member_the_same_partition_numbers() {
        let spec = group(
            vec![member("a", &[1, 2, 3]), member("b", &[1, 2, 3]), member("c", &[1, 2])],
            &[(1, 7), (2, 7), (3, 7)],
        );
        let answer = range(&spec);
        for id in ["a", "b", "c"] {
            assert_eq!(partitions(&answer, id, 1), partitions(&answer, id, 2), "{id}");
        }
        assert_eq!(partitions(&answer, "a", 1), [0, 1, 2]);
        assert_eq!(partitions(&answer, "c", 1), [5, 6]);
        // Topic 3 has other subscribers, so its own ranges.
        assert_eq!(partitions(&answer, "a", 3), [0, 1, 2, 3]);
        assert_eq!(partitions(&answer, "b", 3), [4, 5, 6]);
        assert!(!answer["c"].contains_key(&topic(3)), "c does not subscribe to 3");
    }

    #[test]
    fn static_members_come_first_by_instance_id_and_keep_their_range_under_a_new_id() {
        let with_instance = |id: &str, instance: &str| {
            let mut member = member(id, &[1]);
            member.instance_id = Some(instance.to_string());
            member
        };
        let spec = group(
            vec![member("a", &[1]), with_instance("b", "zeta"), with_instance("c", "alpha")],
            &[(1, 6)],
        );
        let answer = range(&spec);
        assert_eq!(partitions(&answer, "c", 1), [0, 1]);
        assert_eq!(partitions(&answer, "b", 1), [2, 3]);
        assert_eq!(partitions(&answer, "a", 1), [4, 5]);
        let mut rejoined = spec.clone();
        rejoined.members[2] = with_instance("0-new-id", "alpha");
        rejoined.members.sort_by(|x, y| x.member_id.cmp(&y.member_id));
        let again = range(&rejoined);
        assert_eq!(partitions(&again, "0-new-id", 1), [0, 1]);
        assert_eq!(partitions(&again, "b", 1), [2, 3]);
        assert_eq!(partitions(&again, "a", 1), [4, 5]);
    }

    #[test]
    fn current_targets_play_no_part() {
        let spec =
            group(vec![holding(member("a", &[1]), &[(1, &[2, 3])]), member("b", &[1])], &[(1, 4)]);
        let answer = range(&spec);
        assert_eq!(partitions(&answer, "a", 1), [0, 1]);
        assert_eq!(partitions(&answer, "b", 1), [2, 3]);
    }

    #[test]
    fn more_members_than_partitions_leaves_the_last_ones_without() {
        let spec = group(vec![member("a", &[1]), member("b", &[1]), member("c", &[1])], &[(1, 2)]);
        let answer = range(&spec);
        assert_eq!(partitions(&answer, "a", 1), [0]);
        assert_eq!(partitions(&answer, "b", 1), [1]);
        assert!(answer["c"].is_empty(), "no empty set for a topic");
    }

    #[test]
    fn deleted_topics_and_members_with_no_topics_get_nothing() {
        let spec = group(
            vec![member("a", &[1, 9]), member("b", &[]), member("c", &[1])],
            &[(1, 3), (2, 4), (3, 0)],
        );
        let answer = range(&spec);
        assert_eq!(partitions(&answer, "a", 1), [0, 1]);
        assert_eq!(partitions(&answer, "c", 1), [2]);
        assert!(answer["b"].is_empty());
        assert!(!answer["a"].contains_key(&topic(9)), "9 does not exist");
        let shrunk = group(spec.members.clone(), &[(1, 1)]);
        let answer = range(&shrunk);
        assert_eq!(partitions(&answer, "a", 1), [0]);
        assert!(answer["c"].is_empty());
    }

    #[test]
    fn the_member_order_puts_instance_ids_first() {
        let mut spec = group(vec![member("a", &[]), member("b", &[]), member("c", &[])], &[]);
        spec.members[1].instance_id = Some("x".to_string());
        assert_eq!(super::member_order(&spec), [1, 0, 2]);
    }
}
