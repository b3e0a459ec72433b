//! OffsetFetch (key 9): committed offsets of a group (v8+: of several groups, KIP-709). An
//! unknown group, or a partition without a commit, answers offset -1 with no error, as Kafka.

use crate::error::code;
use crate::group::{self, OFFSETS_TOPIC};
use crate::router::{call, ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (1, 8);

/// (topic, partition, offset, metadata) for one group; `wanted` None means all committed.
async fn fetch(
    shard: &Rc<Shard>,
    group: &str,
    wanted: Option<Vec<(String, i32)>>,
) -> Vec<(String, i32, i64, String)> {
    let owner = shard.owner_of(OFFSETS_TOPIC, group::partition_for_group(group));
    let found = match call(
        shard,
        owner,
        ShardRequest::FetchOffsets { group: group.to_string(), wanted: wanted.clone() },
    )
    .await
    {
        ShardResponse::FetchOffsets(found) => found,
        _ => Vec::new(),
    };
    match wanted {
        None => found.into_iter().map(|(t, p, c)| (t, p, c.offset, c.metadata)).collect(),
        Some(wanted) => wanted
            .into_iter()
            .map(|(topic, partition)| {
                match found.iter().find(|(t, p, _)| *t == topic && *p == partition) {
                    Some((_, _, committed)) => {
                        (topic, partition, committed.offset, committed.metadata.clone())
                    }
                    None => (topic, partition, -1, String::new()),
                }
            })
            .collect(),
    }
}

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        for requested in &request.groups {
            let group = requested.group_id.0.to_string();
            let wanted = requested.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .flat_map(|t| {
                        t.partition_indexes.iter().map(move |p| (t.name.0.to_string(), *p))
                    })
                    .collect()
            });
            let mut group_response = OffsetFetchResponseGroup::default();
            group_response.group_id = requested.group_id.clone();
            group_response.error_code = code::NONE;
            for (topic, partition, offset, metadata) in fetch(shard, &group, wanted).await {
                let mut entry = OffsetFetchResponsePartitions::default();
                entry.partition_index = partition;
                entry.committed_offset = offset;
                entry.committed_leader_epoch = -1;
                entry.metadata = Some(super::str_bytes(&metadata));
                match group_response.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                    Some(t) => t.partitions.push(entry),
                    None => {
                        let mut t = OffsetFetchResponseTopics::default();
                        t.name = TopicName(super::str_bytes(&topic));
                        t.partitions.push(entry);
                        group_response.topics.push(t);
                    }
                }
            }
            response.groups.push(group_response);
        }
        return response;
    }
    let group = request.group_id.0.to_string();
    let wanted = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partition_indexes.iter().map(move |p| (t.name.0.to_string(), *p)))
            .collect()
    });
    for (topic, partition, offset, metadata) in fetch(shard, &group, wanted).await {
        let mut entry = OffsetFetchResponsePartition::default();
        entry.partition_index = partition;
        entry.committed_offset = offset;
        if version >= 5 {
            entry.committed_leader_epoch = -1;
        }
        entry.metadata = Some(super::str_bytes(&metadata));
        match response.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(entry),
            None => {
                let mut t = OffsetFetchResponseTopic::default();
                t.name = TopicName(super::str_bytes(&topic));
                t.partitions.push(entry);
                response.topics.push(t);
            }
        }
    }
    if version >= 2 {
        response.error_code = code::NONE;
    }
    response
}
