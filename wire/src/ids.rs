//! Kafka identifiers as distinct types, so that a node id is never passed where a partition
//! index or a leader epoch is expected (STYLE: "distinct types over bare integers where mixing
//! them is a real risk"). Each wraps the integer Kafka puts on the wire; `.0` is that value.
//!
//! Runs on: any core; plain values.

use std::fmt;

/// A broker's `node.id` (Kafka's `BrokerId` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub i32);

/// A partition's index within its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionId(pub i32);

/// A partition leader's epoch (KIP-101): bumped each time leadership changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaderEpoch(pub i32);

/// An offset in a partition's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Offset(pub i64);

macro_rules! display_inner {
    ($($name:ident),*) => {
        $(impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        })*
    };
}
display_inner!(NodeId, PartitionId, LeaderEpoch, Offset);

/// A topic name with a partition index: the unit every partition request is routed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: PartitionId,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self { topic: topic.into(), partition: PartitionId(partition) }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition.0)
    }
}
