//! The group coordinator's requests, each with the type of its answer (`mesh::Ask`), and how
//! the service answers them (`mesh::Answers`). Every answer first follows a leadership change
//! since the last request (`follow_leadership`): no request sees a group before its
//! replicated state is replayed.

use super::{
    Assignment, Committed, Described, GroupService, JoinOutcome, JoinRequest, ListedGroup,
    OffsetsDeleted, TxnCommit,
};
use crate::error::{BrokerError, GroupError, Result};
use crate::mesh::{answers, Ask};
use crate::services::partitions::txn_markers::MarkerSpec;
use bytes::Bytes;
use wire::ids::TopicPartition;

impl Ask for JoinRequest {
    type Answer = JoinOutcome;
}

answers!(GroupService, JoinRequest, |service, join| {
    service.follow_leadership().await;
    // A classic member of a KIP-848 consumer group (`migration`).
    if let Some(outcome) = service.classic_join_consumer_group(&join).await {
        return outcome;
    }
    service.join(join).await
});

/// SyncGroup.
pub struct Sync {
    pub group: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub assignments: Vec<(String, Bytes)>,
}

impl Ask for Sync {
    type Answer = std::result::Result<Assignment, GroupError>;
}

answers!(GroupService, Sync, |service, sync| {
    service.follow_leadership().await;
    if let Some(cell) = service.consumer_cell(&sync.group) {
        return service.classic_sync_consumer_group(&cell, &sync.member_id, sync.generation);
    }
    let instance_id = sync.instance_id.as_deref();
    service.sync(&sync.group, &sync.member_id, instance_id, sync.generation, sync.assignments).await
});

/// Heartbeat.
pub struct Heartbeat {
    pub group: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
}

impl Ask for Heartbeat {
    type Answer = std::result::Result<(), GroupError>;
}

answers!(GroupService, Heartbeat, |service, beat| {
    service.follow_leadership().await;
    if let Some(cell) = service.consumer_cell(&beat.group) {
        return service.classic_heartbeat_consumer_group(&cell, &beat.member_id, beat.generation);
    }
    service.heartbeat(&beat.group, &beat.member_id, beat.instance_id.as_deref(), beat.generation)
});

/// LeaveGroup: members named by (member id, group instance id).
pub struct Leave {
    pub group: String,
    pub members: Vec<(String, Option<String>)>,
}

impl Ask for Leave {
    /// One result per member, in order.
    type Answer = Vec<std::result::Result<(), GroupError>>;
}

answers!(GroupService, Leave, |service, leave| {
    service.follow_leadership().await;
    if let Some(cell) = service.consumer_cell(&leave.group) {
        return service.classic_leave_consumer_group(&leave.group, cell, &leave.members).await;
    }
    service.leave(&leave.group, &leave.members)
});

/// DescribeGroups, for one group.
pub struct Describe {
    pub group: String,
}

impl Ask for Describe {
    type Answer = Described;
}

answers!(GroupService, Describe, |service, describe| {
    service.follow_leadership().await;
    service.describe(&describe.group)
});

/// Every group this shard coordinates; a group with only committed offsets is Empty with no
/// protocol type.
pub struct List;

impl Ask for List {
    type Answer = Vec<ListedGroup>;
}

answers!(GroupService, List, |service, _list| {
    service.follow_leadership().await;
    service.list()
});

/// OffsetCommit.
pub struct Commit {
    pub group: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub entries: Vec<(TopicPartition, Committed)>,
    /// The OffsetCommit version (KIP-848 members must commit with v9+).
    pub api_version: i16,
}

impl Ask for Commit {
    type Answer = Result<()>;
}

answers!(GroupService, Commit, |service, commit| {
    service.follow_leadership().await;
    let instance_id = commit.instance_id.as_deref();
    let version = Some(commit.api_version);
    match service.check_commit(
        &commit.group,
        &commit.member_id,
        instance_id,
        commit.generation,
        version,
    ) {
        Err(error) => Err(BrokerError::Group(error)),
        Ok(()) => service.commit(&commit.group, commit.entries).await,
    }
});

/// OffsetFetch: `wanted` None means every committed partition of the group.
pub struct FetchOffsets {
    pub group: String,
    pub wanted: Option<Vec<TopicPartition>>,
    /// OffsetFetch v9's member id and epoch (KIP-848), when the request names a member.
    pub member: Option<(String, i32)>,
}

/// The committed offsets, and the group's partitions with an offset committed in a
/// transaction still open (UNSTABLE_OFFSET_COMMIT for OffsetFetch with `require_stable`).
pub struct FetchedOffsets {
    pub committed: Vec<(TopicPartition, Committed)>,
    pub unstable: Vec<TopicPartition>,
}

/// OffsetFetch's answer: the offsets, or the group's error (a KIP-848 member check).
pub type FetchOffsetsAnswer = std::result::Result<FetchedOffsets, GroupError>;

impl Ask for FetchOffsets {
    type Answer = FetchOffsetsAnswer;
}

answers!(GroupService, FetchOffsets, |service, fetch| {
    service.follow_leadership().await;
    let member = fetch.member.as_ref().map(|(id, epoch)| (id.as_str(), *epoch));
    service.check_consumer_fetch(&fetch.group, member)?;
    Ok(FetchedOffsets {
        committed: service.fetch_offsets(&fetch.group, fetch.wanted),
        unstable: service.unstable_partitions(&fetch.group),
    })
});

/// TxnOffsetCommit: offsets held until the transaction's marker (`txn_offsets`).
impl Ask for TxnCommit {
    type Answer = Result<()>;
}

answers!(GroupService, TxnCommit, |service, commit| {
    service.follow_leadership().await;
    service.txn_commit(commit).await
});

/// A transaction marker for an `__consumer_offsets` partition this shard leads.
pub struct TxnMarker {
    pub partition: TopicPartition,
    pub marker: MarkerSpec,
}

impl Ask for TxnMarker {
    type Answer = Result<()>;
}

answers!(GroupService, TxnMarker, |service, marker| {
    service.follow_leadership().await;
    service.txn_marker(&marker.partition, marker.marker).await
});

/// Deletes the group's offsets: all of them with the group (refused while it has members), or
/// some partitions (while it has members, only of topics no member is subscribed to, and only
/// for a `consumer` group, as Kafka).
pub struct DeleteOffsets {
    pub group: String,
    pub partitions: Option<Vec<TopicPartition>>,
}

impl Ask for DeleteOffsets {
    type Answer = Result<OffsetsDeleted>;
}

answers!(GroupService, DeleteOffsets, |service, delete| {
    service.follow_leadership().await;
    service.delete_group_offsets(&delete.group, delete.partitions).await
});

/// (group, partition, committed offset) of every group here, for the lag metric.
pub struct CommittedOffsets;

impl Ask for CommittedOffsets {
    type Answer = Vec<(String, TopicPartition, i64)>;
}

answers!(GroupService, CommittedOffsets, |service, _committed| {
    service.follow_leadership().await;
    service.committed()
});

/// ConsumerGroupHeartbeat (KIP-848), validated by the handler.
impl Ask for super::consumer::HeartbeatRequest {
    type Answer = std::result::Result<super::consumer::HeartbeatAnswer, GroupError>;
}

answers!(GroupService, super::consumer::HeartbeatRequest, |service, beat| {
    service.follow_leadership().await;
    service.consumer_heartbeat(beat).await
});

/// ConsumerGroupDescribe, for one group: `None` when it is not a consumer group here.
pub struct ConsumerDescribe {
    pub group: String,
}

impl Ask for ConsumerDescribe {
    type Answer = Option<super::DescribedConsumerGroup>;
}

answers!(GroupService, ConsumerDescribe, |service, describe| {
    service.follow_leadership().await;
    service.describe_consumer(&describe.group)
});

/// ShareGroupHeartbeat (KIP-932), validated by the handler.
impl Ask for super::share::ShareHeartbeat {
    type Answer = std::result::Result<super::share::ShareHeartbeatAnswer, GroupError>;
}

answers!(GroupService, super::share::ShareHeartbeat, |service, beat| {
    service.follow_leadership().await;
    service.share_heartbeat(beat).await
});

/// ShareGroupDescribe, for one group: `None` when it is not a share group here.
pub struct ShareDescribe {
    pub group: String,
}

impl Ask for ShareDescribe {
    type Answer = Option<super::DescribedShareGroup>;
}

answers!(GroupService, ShareDescribe, |service, describe| {
    service.follow_leadership().await;
    service.describe_share(&describe.group)
});

/// Adds share partitions to a share group's state index (AlterShareGroupOffsets).
pub struct ShareIndexAdd {
    pub group: String,
    pub partitions: super::share_records::StateIndex,
}

impl Ask for ShareIndexAdd {
    type Answer = std::result::Result<(), GroupError>;
}

answers!(GroupService, ShareIndexAdd, |service, add| {
    service.follow_leadership().await;
    service.index_share_partitions(&add.group, &add.partitions).await
});

/// Takes topics out of a share group's state index (DeleteShareGroupOffsets).
pub struct ShareIndexRemove {
    pub group: String,
    pub topics: Vec<super::consumer::TopicId>,
}

impl Ask for ShareIndexRemove {
    type Answer = std::result::Result<(), GroupError>;
}

answers!(GroupService, ShareIndexRemove, |service, remove| {
    service.follow_leadership().await;
    service.unindex_share_topics(&remove.group, &remove.topics).await
});
