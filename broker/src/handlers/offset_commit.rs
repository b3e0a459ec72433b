//! OffsetCommit (key 8): stores committed offsets durably in `__consumer_offsets` on the shard
//! coordinating the group (see `group`). Commits from members are checked against the group
//! (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS); standalone commits
//! (generation -1, no member id) are accepted while the group has no members, as in Kafka.

use crate::error::{error_code, BrokerError};
use crate::group::{self, Committed, OFFSETS_TOPIC, OFFSET_METADATA_BYTES_MAX};
use crate::router::{call, ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (2, 8);

pub async fn handle(shard: &Rc<Shard>, request: OffsetCommitRequest) -> OffsetCommitResponse {
    let group = request.group_id.0.to_string();
    let snapshot = shard.snapshot();
    // Per-partition validation first; the valid ones are committed in one durable append.
    let mut outcomes: Vec<(String, i32, Option<BrokerError>)> = Vec::new();
    let mut entries = Vec::new();
    let group_error = if crate::group::valid_group_id(&group) {
        None
    } else {
        Some(BrokerError::InvalidGroupId(group.clone()))
    };
    let now = shard::runtime::now_ms();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        for partition in &topic.partitions {
            let index = partition.partition_index;
            let metadata =
                partition.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
            let error = if let Some(error) = &group_error {
                Some(match error {
                    BrokerError::InvalidGroupId(g) => BrokerError::InvalidGroupId(g.clone()),
                    BrokerError::UnknownMemberId(m, g) => {
                        BrokerError::UnknownMemberId(m.clone(), g.clone())
                    }
                    BrokerError::IllegalGeneration(n, g) => {
                        BrokerError::IllegalGeneration(*n, g.clone())
                    }
                    other => BrokerError::InvalidRequest(other.to_string()),
                })
            } else if snapshot.topics.get(&name).is_none_or(|t| index < 0 || index >= t.partitions)
            {
                Some(BrokerError::UnknownTopicOrPartition(format!("{name}-{index}")))
            } else if metadata.len() > OFFSET_METADATA_BYTES_MAX {
                Some(BrokerError::OffsetMetadataTooLarge(metadata.len()))
            } else {
                entries.push((
                    name.clone(),
                    index,
                    Committed { offset: partition.committed_offset, metadata, commit_ms: now },
                ));
                None
            };
            outcomes.push((name.clone(), index, error));
        }
    }
    let commit_error = if entries.is_empty() {
        None
    } else {
        let owner = shard.owner_of(OFFSETS_TOPIC, group::partition_for_group(&group));
        let request = ShardRequest::CommitOffsets {
            group: group.clone(),
            member_id: request.member_id.to_string(),
            instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
            generation: request.generation_id_or_member_epoch,
            entries,
        };
        match call(shard, owner, request).await {
            ShardResponse::CommitOffsets(Ok(())) => None,
            ShardResponse::CommitOffsets(Err(error)) => Some(error_code(&error)),
            _ => Some(crate::error::code::UNKNOWN_SERVER_ERROR),
        }
    };
    let mut response = OffsetCommitResponse::default();
    for (name, index, error) in outcomes {
        let mut entry = OffsetCommitResponsePartition::default();
        entry.partition_index = index;
        entry.error_code = match error {
            Some(error) => error_code(&error),
            None => commit_error.unwrap_or(crate::error::code::NONE),
        };
        shard.stats.borrow_mut().count_error(entry.error_code);
        match response.topics.iter_mut().find(|t| t.name.0.as_str() == name) {
            Some(topic) => topic.partitions.push(entry),
            None => {
                let mut topic = OffsetCommitResponseTopic::default();
                topic.name = kafka_protocol::messages::TopicName(super::str_bytes(&name));
                topic.partitions.push(entry);
                response.topics.push(topic);
            }
        }
    }
    response
}
