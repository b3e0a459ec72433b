//! OffsetDelete (key 47, KIP-496): deletes a group's committed offsets for some partitions,
//! only while the group has no members.

use crate::error::code;
use crate::group::{self, OFFSETS_TOPIC};
use crate::router::{call, ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle(shard: &Rc<Shard>, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group = request.group_id.0.to_string();
    let partitions: Vec<(String, i32)> = request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), p.partition_index)))
        .collect();
    let owner = shard.owner_of(OFFSETS_TOPIC, group::partition_for_group(&group));
    let answer =
        call(shard, owner, ShardRequest::DeleteOffsets { group, partitions: Some(partitions) })
            .await;
    let mut response = OffsetDeleteResponse::default();
    response.error_code = match answer {
        ShardResponse::DeleteOffsets(error_code, _) => error_code,
        _ => code::UNKNOWN_SERVER_ERROR,
    };
    for topic in request.topics {
        let mut entry = OffsetDeleteResponseTopic::default();
        entry.name = topic.name;
        entry.partitions = topic
            .partitions
            .iter()
            .map(|p| {
                let mut partition = OffsetDeleteResponsePartition::default();
                partition.partition_index = p.partition_index;
                partition.error_code = code::NONE;
                partition
            })
            .collect();
        response.topics.push(entry);
    }
    response
}
