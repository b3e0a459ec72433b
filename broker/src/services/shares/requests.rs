//! The share-partition service's requests, each with the type of its answer (`mesh::Ask`),
//! and how the service answers them (`mesh::Answers`).

use super::{AckRange, FetchLimits, PartitionAnswer, ShareService};
use crate::error::Result;
use crate::mesh::{answers, Ask};
use std::time::Duration;
use wire::ids::TopicPartition;

/// A member's acknowledgements on one partition, then (with `fetch`) an acquisition.
pub struct SharePartitionFetch {
    pub group: String,
    pub member: String,
    pub partition: TopicPartition,
    pub acks: Vec<AckRange>,
    pub fetch: Option<FetchLimits>,
    /// A share session opens on the partition: check the state in memory against its share
    /// coordinator's (a tool may have reset it while the group had no members).
    pub revalidate: bool,
}

impl Ask for SharePartitionFetch {
    type Answer = Result<PartitionAnswer>;
}

answers!(ShareService, SharePartitionFetch, |service, request| {
    let (group, member) = (request.group.as_str(), request.member.as_str());
    let (acks, fetch) = (&request.acks, request.fetch);
    service.fetch(group, member, &request.partition, acks, fetch, request.revalidate).await
});

/// A member's share session ended: what it holds on these partitions is released.
pub struct ReleaseMember {
    pub group: String,
    pub member: String,
    pub partitions: Vec<TopicPartition>,
}

impl Ask for ReleaseMember {
    type Answer = ();
}

answers!(ShareService, ReleaseMember, |service, request| {
    service.release_member(&request.group, &request.member, &request.partitions)
});

/// Waits (at most `wait_ms`) for records to be released on this shard.
pub struct WaitForRelease {
    pub wait_ms: u64,
}

impl Ask for WaitForRelease {
    type Answer = ();
}

answers!(ShareService, WaitForRelease, |service, request| {
    service.wait_for_release(Duration::from_millis(request.wait_ms)).await
});
