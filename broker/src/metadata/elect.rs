//! Leader elections, as decisions (records) on an image: what fencing and unfencing a broker
//! do to the partitions it leads or could lead, and ElectLeaders' preferred and unclean
//! elections (KIP-460), also run by the controller's automatic leader rebalance. Pure: the
//! controller (liveness, ElectLeaders through the metadata service) proposes what these
//! return on the condition that the image has not moved.
//!
//! Kafka's rules: a new leader comes from the ISR, among live brokers; the ISR never becomes
//! empty (a partition whose last in-sync replica is fenced keeps it, with no leader, -1);
//! only `unclean.leader.election.enable` (the topic's, else the cluster default) or an
//! UNCLEAN ElectLeaders lets a live replica outside the ISR lead, as the whole ISR. Every
//! leader change is in the next leader epoch. Fencing a leader hands its partitions to
//! another live in-sync replica; a partition with none left is leaderless unless unclean
//! election is on.
//! Runs on: shard 0 (decisions) and the controller thread (liveness), pure functions.

use super::image::{MetadataImage, TopicImage};
use super::placement::Placement;
use super::records::MetadataRecord;
use super::topic_config::effective_config;
use crate::error::{BrokerError, Result};
use wire::ids::{LeaderEpoch, NodeId, PartitionId};

/// No leader (Kafka's -1): no in-sync replica is live.
pub const NO_LEADER: NodeId = NodeId(-1);

/// Whether `node` is a registered, unfenced broker.
pub(super) fn live(image: &MetadataImage, node: NodeId) -> bool {
    image.brokers.get(&node).is_some_and(|broker| !broker.fenced)
}

/// Whether the topic allows unclean leader election (its config, else the cluster default).
pub fn unclean_allowed(image: &MetadataImage, topic: &TopicImage) -> bool {
    effective_config(image, -1, topic, "unclean.leader.election.enable").0 == Some("true")
}

/// The change taking a partition to (`leader`, `isr`), or none when that is where it is.
fn change(
    topic: &TopicImage,
    index: usize,
    placement: &Placement,
    leader: NodeId,
    isr: Vec<NodeId>,
) -> Option<MetadataRecord> {
    if leader == placement.leader && isr == placement.isr {
        return None;
    }
    let epoch = if leader == placement.leader {
        placement.leader_epoch
    } else {
        LeaderEpoch(placement.leader_epoch.0.saturating_add(1))
    };
    let isr = (isr != placement.isr).then_some(isr);
    Some(MetadataRecord::PartitionChange {
        topic_id: topic.topic_id,
        partition: PartitionId(i32::try_from(index).unwrap_or(i32::MAX)),
        leader,
        leader_epoch: epoch,
        isr,
    })
}

/// The changes `decide` makes to every partition, in topic order.
fn changes(
    image: &MetadataImage,
    decide: impl Fn(&TopicImage, &Placement) -> Option<(NodeId, Vec<NodeId>)>,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics.values() {
        for (index, placement) in topic.partitions.iter().enumerate() {
            if let Some((leader, isr)) = decide(topic, placement) {
                records.extend(change(topic, index, placement, leader, isr));
            }
        }
    }
    records
}

/// A live replica outside `excluded` for an unclean election: the first in replica order.
fn unclean_candidate(
    image: &MetadataImage,
    placement: &Placement,
    excluded: NodeId,
) -> Option<NodeId> {
    placement.replicas.iter().copied().find(|node| *node != excluded && live(image, *node))
}

/// Fences `node` (its heartbeats stopped, or it is shutting down): it is marked fenced and
/// leaves every ISR it is in (unless it is the last member); each partition it leads gets the
/// next live member of its ISR as leader, or with none an out-of-sync live replica when
/// unclean election is allowed, or no leader (-1). Nothing when the broker is unknown or
/// fenced already.
pub fn fence_broker(image: &MetadataImage, node: NodeId) -> Vec<MetadataRecord> {
    if image.brokers.get(&node).is_none_or(|broker| broker.fenced) {
        return Vec::new();
    }
    let mut records = vec![MetadataRecord::FenceBroker { node }];
    records.extend(changes(image, |topic, placement| {
        if placement.leader != node && !placement.isr.contains(&node) {
            return None;
        }
        let mut isr: Vec<NodeId> = placement.isr.iter().copied().filter(|n| *n != node).collect();
        if isr.is_empty() {
            isr.push(node);
        }
        if placement.leader != node {
            return Some((placement.leader, isr));
        }
        let next = isr.iter().copied().find(|n| *n != node && live(image, *n));
        match next {
            Some(leader) => Some((leader, isr)),
            None if unclean_allowed(image, topic) => {
                match unclean_candidate(image, placement, node) {
                    Some(leader) => Some((leader, vec![leader])),
                    None => Some((NO_LEADER, isr)),
                }
            }
            None => Some((NO_LEADER, isr)),
        }
    }));
    records
}

/// Unfences `node` (its heartbeats are back): it is marked live, and every leaderless
/// partition whose ISR holds it is led by it again, in the next leader epoch (with unclean
/// election allowed, a leaderless partition it is only a replica of too, with it as the whole
/// ISR). Nothing when the broker is unknown or live already.
pub fn unfence_broker(image: &MetadataImage, node: NodeId) -> Vec<MetadataRecord> {
    if image.brokers.get(&node).is_none_or(|broker| !broker.fenced) {
        return Vec::new();
    }
    let mut records = vec![MetadataRecord::UnfenceBroker { node }];
    records.extend(changes(image, |topic, placement| {
        if placement.leader != NO_LEADER {
            return None;
        }
        if placement.isr.contains(&node) {
            Some((node, placement.isr.clone()))
        } else if placement.replicas.contains(&node) && unclean_allowed(image, topic) {
            Some((node, vec![node]))
        } else {
            None
        }
    }));
    records
}

/// ElectLeaders' election types (KIP-460).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// Back to the first replica, when it is live and in sync.
    Preferred,
    /// A leader for a leaderless partition: from the ISR, else any live replica.
    Unclean,
}

/// A partition by name: ("topic-partition", its topic, its index, its placement), or
/// UNKNOWN_TOPIC_OR_PARTITION.
pub(super) fn locate<'a>(
    image: &'a MetadataImage,
    topic: &str,
    partition: i32,
) -> Result<(String, &'a TopicImage, usize, &'a Placement)> {
    let name = format!("{topic}-{partition}");
    let unknown = || BrokerError::UnknownTopicOrPartition(name.clone());
    let topic = image.topic(topic).ok_or_else(unknown)?;
    let index = usize::try_from(partition).map_err(|_| unknown())?;
    let placement = topic.partitions.get(index).ok_or_else(unknown)?;
    Ok((name, topic, index, placement))
}

/// One partition's election: its change, or why none is made (ELECTION_NOT_NEEDED,
/// PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION).
pub fn elect(
    image: &MetadataImage,
    kind: ElectionType,
    topic: &str,
    partition: i32,
) -> Result<Vec<MetadataRecord>> {
    let (name, topic, index, placement) = locate(image, topic, partition)?;
    let (leader, isr) = match kind {
        ElectionType::Preferred => {
            let preferred = placement.replicas.first().copied().unwrap_or(NO_LEADER);
            if placement.leader == preferred {
                return Err(BrokerError::ElectionNotNeeded(name));
            }
            if !live(image, preferred) || !placement.isr.contains(&preferred) {
                return Err(BrokerError::PreferredLeaderNotAvailable(format!(
                    "{name}: the preferred leader {} is not a live in-sync replica",
                    preferred.0
                )));
            }
            (preferred, placement.isr.clone())
        }
        ElectionType::Unclean => {
            if placement.leader != NO_LEADER {
                return Err(BrokerError::ElectionNotNeeded(name));
            }
            let in_sync = placement.isr.iter().copied().find(|node| live(image, *node));
            match in_sync.or_else(|| unclean_candidate(image, placement, NO_LEADER)) {
                Some(leader) if placement.isr.contains(&leader) => (leader, placement.isr.clone()),
                Some(leader) => (leader, vec![leader]),
                None => {
                    return Err(BrokerError::EligibleLeadersNotAvailable(format!(
                        "{name}: no replica is live"
                    )))
                }
            }
        }
    };
    Ok(change(topic, index, placement, leader, isr).into_iter().collect())
}

/// A leader's ISR change (Kafka's AlterPartition): `leader` at `leader_epoch` asks for `isr`.
/// Refused when it no longer leads at that epoch (FENCED_LEADER_EPOCH: its image is stale)
/// or the ISR is not of the partition's replicas with the leader in it (INVALID_REQUEST); a
/// broker that is fenced is never added (INELIGIBLE_REPLICA, as KIP-841).
pub fn alter_isr(
    image: &MetadataImage,
    leader: NodeId,
    topic: &str,
    partition: i32,
    leader_epoch: i32,
    isr: &[NodeId],
) -> Result<Vec<MetadataRecord>> {
    let (name, topic, index, placement) = locate(image, topic, partition)?;
    if placement.leader != leader || placement.leader_epoch.0 != leader_epoch {
        return Err(BrokerError::FencedLeaderEpoch(format!(
            "{name}: led by {} at epoch {}, not {} at {leader_epoch}",
            placement.leader.0, placement.leader_epoch.0, leader.0
        )));
    }
    let mut wanted: Vec<NodeId> = Vec::new();
    for node in isr {
        if !placement.replicas.contains(node) || wanted.contains(node) {
            return Err(BrokerError::InvalidRequest(format!(
                "{name}: ISR {isr:?} is not of the replicas {:?}",
                placement.replicas
            )));
        }
        // A fenced broker joins no ISR (it may still be leaving one): the leader asked with
        // a stale image, and is told so rather than answered as if its ISR were committed.
        if !placement.isr.contains(node) && !live(image, *node) {
            return Err(BrokerError::IneligibleReplica(format!(
                "{name}: broker {} is fenced and cannot join the ISR",
                node.0
            )));
        }
        wanted.push(*node);
    }
    if !wanted.contains(&leader) {
        return Err(BrokerError::InvalidRequest(format!(
            "{name}: the leader must stay in its ISR"
        )));
    }
    Ok(change(topic, index, placement, leader, wanted).into_iter().collect())
}

/// The automatic leader rebalance (`auto.leader.rebalance.enable`): a preferred election for
/// every partition whose first replica is live and in sync but not leading.
pub fn preferred_elections(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics.values() {
        for index in 0..topic.partition_count() {
            if let Ok(change) = elect(image, ElectionType::Preferred, &topic.name, index) {
                records.extend(change);
            }
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::apply_all;
    use crate::metadata::image::BrokerRegistration;
    use shard::runtime::ShardId;

    /// Brokers 1, 2 and 3 (3 fenced), and topic "t" with one partition per (leader, isr),
    /// every one of replicas [1, 2, 3].
    fn image(partitions: &[(i32, &[i32])]) -> MetadataImage {
        let mut records = Vec::new();
        for node in 1..=3 {
            records.push(MetadataRecord::RegisterBroker {
                broker: BrokerRegistration {
                    node: NodeId(node),
                    incarnation: [node as u8; 16],
                    directory_id: format!("d{node}"),
                    host: "h".into(),
                    port: 9000,
                    rack: None,
                    shards: 1,
                    listeners: Vec::new(),
                },
            });
        }
        records.push(MetadataRecord::FenceBroker { node: NodeId(3) });
        records.push(MetadataRecord::Topic { name: "t".into(), topic_id: [1; 16] });
        for (index, (leader, isr)) in partitions.iter().enumerate() {
            records.push(MetadataRecord::Partition {
                topic_id: [1; 16],
                partition: PartitionId(index as i32),
                placement: Placement {
                    leader: NodeId(*leader),
                    shard: ShardId(0),
                    leader_epoch: LeaderEpoch(4),
                    replicas: vec![NodeId(1), NodeId(2), NodeId(3)],
                    isr: isr.iter().copied().map(NodeId).collect(),
                    partition_epoch: 0,
                    adding: Vec::new(),
                    removing: Vec::new(),
                },
            });
        }
        apply_all(&MetadataImage::default(), &records).expect("a valid image")
    }

    fn leader_after(
        image: &MetadataImage,
        records: &[MetadataRecord],
        partition: usize,
    ) -> (i32, i32, Vec<i32>) {
        let next = apply_all(image, records).expect("decisions apply");
        let placement = &next.topic("t").expect("t").partitions[partition];
        (placement.leader.0, placement.leader_epoch.0, placement.isr.iter().map(|n| n.0).collect())
    }

    #[test]
    fn preferred_elections_move_back_to_a_live_in_sync_first_replica_only() {
        let image = image(&[(2, &[1, 2]), (1, &[1]), (2, &[2]), (-1, &[3])]);
        let moved = elect(&image, ElectionType::Preferred, "t", 0).expect("eligible");
        assert_eq!(leader_after(&image, &moved, 0), (1, 5, vec![1, 2]));
        assert!(matches!(
            elect(&image, ElectionType::Preferred, "t", 1),
            Err(BrokerError::ElectionNotNeeded(_))
        ));
        assert!(matches!(
            elect(&image, ElectionType::Preferred, "t", 2),
            Err(BrokerError::PreferredLeaderNotAvailable(_))
        ));
        assert!(matches!(
            elect(&image, ElectionType::Preferred, "t", 9),
            Err(BrokerError::UnknownTopicOrPartition(_))
        ));
        assert_eq!(preferred_elections(&image), moved, "the rebalance makes the same one move");
    }

    #[test]
    fn unclean_elections_give_a_leaderless_partition_a_live_replica() {
        let image = image(&[(-1, &[3]), (1, &[1])]);
        let elected = elect(&image, ElectionType::Unclean, "t", 0).expect("a live replica");
        assert_eq!(leader_after(&image, &elected, 0), (1, 5, vec![1]), "the whole ISR now");
        assert!(matches!(
            elect(&image, ElectionType::Unclean, "t", 1),
            Err(BrokerError::ElectionNotNeeded(_))
        ));
        let mut all_fenced = image.clone();
        for broker in all_fenced.brokers.values_mut() {
            broker.fenced = true;
        }
        assert!(matches!(
            elect(&all_fenced, ElectionType::Unclean, "t", 0),
            Err(BrokerError::EligibleLeadersNotAvailable(_))
        ));
    }

    #[test]
    fn fencing_hands_leadership_to_the_next_live_in_sync_replica_or_unclean_or_none() {
        let image = image(&[(1, &[1, 2]), (1, &[1]), (2, &[2, 1])]);
        let fenced = fence_broker(&image, NodeId(1));
        assert_eq!(leader_after(&image, &fenced, 0), (2, 5, vec![2]));
        assert_eq!(leader_after(&image, &fenced, 1), (-1, 5, vec![1]), "the last ISR member stays");
        assert_eq!(leader_after(&image, &fenced, 2), (2, 4, vec![2]), "only the ISR shrinks");
        let mut unclean = image.clone();
        if let Some(topic) = unclean.topics.get_mut("t") {
            topic.configs.insert("unclean.leader.election.enable".into(), "true".into());
        }
        let fenced = fence_broker(&unclean, NodeId(1));
        assert_eq!(leader_after(&unclean, &fenced, 1), (2, 5, vec![2]), "unclean: a live replica");
    }
}
