//! Partition reassignment (KIP-455, AlterPartitionReassignments): moving a partition's
//! replicas to a target set through the controller, with no moment at which fewer copies are
//! in sync than before the move.
//!
//! - Start: the replicas become the target followed by the current replicas outside it; the
//!   target's new members are `adding`, the current ones outside it `removing`. The added
//!   replicas open the partition and follow its leader like any follower, and the leader adds
//!   each to the ISR once it has caught up (`services::partitions::replica`).
//! - Finish (`finish_reassignments`, run by the active controller, and at once when the
//!   target is in sync already): once every target replica is in the ISR, the replicas
//!   become the target, the ISR loses the leaving ones, and a leader that leaves hands over to
//!   the first live target replica in the ISR (a new leader epoch). The brokers that lost
//!   their replica close the partition and delete its files.
//! - A new target while a move runs starts again from the replicas before it (those not being
//!   added); a null target cancels the move: back to those replicas, the ISR without the added
//!   ones, a leader among the added ones handing over likewise.
//!
//! Runs on: any shard and the controller thread (pure functions of the image).

use super::decide::validate_assignments;
use super::elect::{live, locate, NO_LEADER};
use super::image::MetadataImage;
use super::placement::Placement;
use super::records::MetadataRecord;
use crate::error::{BrokerError, Result};
use wire::ids::{LeaderEpoch, NodeId, PartitionId};

/// The replica state a step of a reassignment leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    replicas: Vec<NodeId>,
    isr: Vec<NodeId>,
    adding: Vec<NodeId>,
    removing: Vec<NodeId>,
    leader: NodeId,
}

impl Step {
    fn of(placement: &Placement) -> Step {
        Step {
            replicas: placement.replicas.clone(),
            isr: placement.isr.clone(),
            adding: placement.adding.clone(),
            removing: placement.removing.clone(),
            leader: placement.leader,
        }
    }

    /// The replicas this one is a move from: all but those being added.
    fn original(&self) -> Vec<NodeId> {
        self.replicas.iter().copied().filter(|node| !self.adding.contains(node)).collect()
    }

    /// Keeps only the ISR members among the replicas, and a leader that is one of them (else
    /// the first live one of `preferred` in the ISR, or none).
    fn settle(mut self, image: &MetadataImage, preferred: &[NodeId]) -> Step {
        let replicas = self.replicas.clone();
        self.isr.retain(|node| replicas.contains(node));
        if !self.isr.contains(&self.leader) {
            let isr = &self.isr;
            self.leader = preferred
                .iter()
                .copied()
                .find(|node| isr.contains(node) && live(image, *node))
                .unwrap_or(NO_LEADER);
        }
        self
    }

    /// The finished move, when every target replica is in sync and one of them can lead.
    fn finished(&self, image: &MetadataImage) -> Option<Step> {
        let target: Vec<NodeId> =
            self.replicas.iter().copied().filter(|node| !self.removing.contains(node)).collect();
        if !target.iter().all(|node| self.isr.contains(node)) {
            return None;
        }
        let done = Step {
            replicas: target.clone(),
            isr: self.isr.clone(),
            adding: Vec::new(),
            removing: Vec::new(),
            leader: self.leader,
        }
        .settle(image, &target);
        (done.leader != NO_LEADER).then_some(done)
    }

    fn record(self, topic_id: [u8; 16], index: usize, placement: &Placement) -> MetadataRecord {
        let leader_epoch = if self.leader == placement.leader {
            placement.leader_epoch
        } else {
            LeaderEpoch(placement.leader_epoch.0.saturating_add(1))
        };
        MetadataRecord::PartitionReplicas {
            topic_id,
            partition: PartitionId(i32::try_from(index).unwrap_or(i32::MAX)),
            replicas: self.replicas,
            isr: self.isr,
            adding: self.adding,
            removing: self.removing,
            leader: self.leader,
            leader_epoch,
        }
    }
}

/// One partition's reassignment request: to `target` (its first replica the preferred
/// leader), or with `None` the cancellation of the running one. Refused with
/// INVALID_REPLICA_ASSIGNMENT (an empty target, a broker twice or not registered, or a move
/// that would leave no in-sync replica), NO_REASSIGNMENT_IN_PROGRESS (a cancellation with
/// none running) or UNKNOWN_TOPIC_OR_PARTITION. Nothing to do (the target is where the
/// partition is) is no records.
pub fn reassign(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    target: Option<&[i32]>,
) -> Result<Vec<MetadataRecord>> {
    let (name, topic, index, placement) = locate(image, topic, partition)?;
    let current = Step::of(placement);
    let original = current.original();
    let next = match target {
        None => {
            if !placement.reassigning() {
                return Err(BrokerError::NoReassignmentInProgress(name));
            }
            Step {
                replicas: original.clone(),
                isr: current.isr.clone(),
                adding: Vec::new(),
                removing: Vec::new(),
                leader: current.leader,
            }
            .settle(image, &original)
        }
        Some(target) => {
            // A single node registers no brokers: its own replicas are all there are.
            let registered: Vec<i32> = if image.brokers.is_empty() {
                placement.replicas.iter().map(|node| node.0).collect()
            } else {
                image.brokers.keys().map(|node| node.0).collect()
            };
            validate_assignments(&[(partition, target.to_vec())], &registered, None)?;
            let target: Vec<NodeId> = target.iter().copied().map(NodeId).collect();
            let removing: Vec<NodeId> =
                original.iter().copied().filter(|node| !target.contains(node)).collect();
            let step = Step {
                replicas: target.iter().chain(&removing).copied().collect(),
                isr: current.isr.clone(),
                adding: target.iter().copied().filter(|node| !original.contains(node)).collect(),
                removing,
                leader: current.leader,
            }
            .settle(image, &target);
            step.finished(image).unwrap_or(step)
        }
    };
    if next.isr.is_empty() {
        return Err(BrokerError::InvalidReplicaAssignment(format!(
            "{name}: no in-sync replica would remain (in sync: {:?})",
            placement.isr.iter().map(|node| node.0).collect::<Vec<_>>()
        )));
    }
    if next == current {
        return Ok(Vec::new());
    }
    Ok(vec![next.record(topic.topic_id, index, placement)])
}

/// Every running reassignment whose target is in sync, finished (run by the active
/// controller's periodic check).
pub fn finish_reassignments(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics.values() {
        for (index, placement) in topic.partitions.iter().enumerate() {
            if !placement.reassigning() {
                continue;
            }
            if let Some(done) = Step::of(placement).finished(image) {
                records.push(done.record(topic.topic_id, index, placement));
            }
        }
    }
    records
}

/// A running reassignment as ListPartitionReassignments reports it: (topic, partition,
/// replicas, adding, removing).
pub type Running = (String, i32, Vec<i32>, Vec<i32>, Vec<i32>);

/// The running reassignments of `wanted` partitions (every partition when `None`).
pub fn running(image: &MetadataImage, wanted: Option<&[(String, i32)]>) -> Vec<Running> {
    let ids = |nodes: &[NodeId]| nodes.iter().map(|node| node.0).collect::<Vec<i32>>();
    let mut out = Vec::new();
    for topic in image.topics.values() {
        for (index, placement) in topic.partitions.iter().enumerate() {
            let index = i32::try_from(index).unwrap_or(i32::MAX);
            let asked = wanted.is_none_or(|wanted| {
                wanted.iter().any(|(name, partition)| *name == topic.name && *partition == index)
            });
            if asked && placement.reassigning() {
                out.push((
                    topic.name.clone(),
                    index,
                    ids(&placement.replicas),
                    ids(&placement.adding),
                    ids(&placement.removing),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::apply_all;
    use crate::metadata::image::BrokerRegistration;
    use crate::metadata::records::MetadataRecord;
    use shard::runtime::ShardId;

    /// Brokers 1-4 (live), topic "t" with partition 0 on replicas [1, 2] led by 1, in sync.
    fn image() -> MetadataImage {
        let mut records = Vec::new();
        for node in 1..=4 {
            records.push(MetadataRecord::RegisterBroker {
                broker: BrokerRegistration {
                    node: NodeId(node),
                    incarnation: [node as u8; 16],
                    directory_id: String::new(),
                    host: "h".into(),
                    port: 9092,
                    rack: None,
                    shards: 1,
                    listeners: Vec::new(),
                },
            });
        }
        records.push(MetadataRecord::Topic { name: "t".into(), topic_id: [1; 16] });
        records.push(MetadataRecord::Partition {
            topic_id: [1; 16],
            partition: PartitionId(0),
            placement: Placement {
                leader: NodeId(1),
                shard: ShardId(0),
                leader_epoch: LeaderEpoch(3),
                replicas: vec![NodeId(1), NodeId(2)],
                isr: vec![NodeId(1), NodeId(2)],
                partition_epoch: 0,
                adding: Vec::new(),
                removing: Vec::new(),
            },
        });
        apply_all(&MetadataImage::default(), &records).expect("image")
    }

    fn placement(image: &MetadataImage) -> Placement {
        image.topic("t").and_then(|t| t.placement(0)).cloned().expect("partition")
    }

    fn ids(nodes: &[NodeId]) -> Vec<i32> {
        nodes.iter().map(|node| node.0).collect()
    }

    fn step(image: &MetadataImage, target: Option<&[i32]>) -> MetadataImage {
        let records = reassign(image, "t", 0, target).expect("decided");
        apply_all(image, &records).expect("applies")
    }

    #[test]
    fn a_move_adds_the_target_then_finishes_once_it_is_in_sync_and_the_leader_hands_over() {
        let started = step(&image(), Some(&[2, 3]));
        let p = placement(&started);
        assert_eq!(ids(&p.replicas), [2, 3, 1]);
        assert_eq!((ids(&p.adding), ids(&p.removing)), (vec![3], vec![1]));
        assert_eq!((p.leader, p.leader_epoch), (NodeId(1), LeaderEpoch(3)), "1 leads on");
        assert!(finish_reassignments(&started).is_empty(), "3 is not in sync yet");
        let listed = running(&started, None);
        assert_eq!(listed, vec![("t".into(), 0, vec![2, 3, 1], vec![3], vec![1])]);

        // The leader adds 3 to the ISR once it caught up (AlterPartition).
        let caught_up = apply_all(
            &started,
            &crate::metadata::elect::alter_isr(
                &started,
                NodeId(1),
                "t",
                0,
                3,
                &[NodeId(1), NodeId(2), NodeId(3)],
            )
            .expect("isr"),
        )
        .expect("applies");
        let finished = apply_all(&caught_up, &finish_reassignments(&caught_up)).expect("applies");
        let p = placement(&finished);
        assert_eq!((ids(&p.replicas), ids(&p.isr)), (vec![2, 3], vec![2, 3]));
        assert!(!p.reassigning());
        assert_eq!((p.leader, p.leader_epoch), (NodeId(2), LeaderEpoch(4)), "first target in sync");
        assert!(running(&finished, None).is_empty());
    }

    #[test]
    fn a_reorder_or_a_shrink_within_the_isr_finishes_at_once_and_the_same_target_is_nothing() {
        let reordered = step(&image(), Some(&[2, 1]));
        let p = placement(&reordered);
        assert_eq!((ids(&p.replicas), p.leader, p.reassigning()), (vec![2, 1], NodeId(1), false));
        let shrunk = step(&image(), Some(&[2]));
        let p = placement(&shrunk);
        assert_eq!((ids(&p.replicas), ids(&p.isr), p.leader), (vec![2], vec![2], NodeId(2)));
        assert!(reassign(&image(), "t", 0, Some(&[1, 2])).expect("ok").is_empty());
    }

    #[test]
    fn a_cancellation_goes_back_to_the_replicas_before_the_move() {
        let started = step(&image(), Some(&[3, 4]));
        assert_eq!(ids(&placement(&started).replicas), [3, 4, 1, 2]);
        let cancelled = step(&started, None);
        let p = placement(&cancelled);
        assert_eq!((ids(&p.replicas), ids(&p.isr), p.leader), (vec![1, 2], vec![1, 2], NodeId(1)));
        assert!(!p.reassigning());
        let again = reassign(&cancelled, "t", 0, None);
        assert!(matches!(again, Err(BrokerError::NoReassignmentInProgress(_))), "{again:?}");
    }

    #[test]
    fn bad_targets_are_refused_with_kafkas_errors() {
        for bad in [&[][..], &[1, 1], &[1, 9]] {
            let refused = reassign(&image(), "t", 0, Some(bad));
            assert!(matches!(refused, Err(BrokerError::InvalidReplicaAssignment(_))), "{bad:?}");
        }
        let unknown = reassign(&image(), "t", 5, Some(&[1]));
        assert!(matches!(unknown, Err(BrokerError::UnknownTopicOrPartition(_))), "{unknown:?}");
    }
}
