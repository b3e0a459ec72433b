//! DeleteGroups (key 42): deletes groups without members and their committed offsets
//! (NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND for unknown groups).

use crate::group::{self, OFFSETS_TOPIC};
use crate::router::{call, ShardRequest, ShardResponse};
use crate::state::Shard;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle(shard: &Rc<Shard>, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut response = DeleteGroupsResponse::default();
    for group_id in request.groups_names {
        let name = group_id.0.to_string();
        let owner = shard.owner_of(OFFSETS_TOPIC, group::partition_for_group(&name));
        let mut result = DeletableGroupResult::default();
        result.group_id = group_id;
        result.error_code =
            match call(shard, owner, ShardRequest::DeleteOffsets { group: name, partitions: None })
                .await
            {
                ShardResponse::DeleteOffsets(code, _) => code,
                _ => crate::error::code::UNKNOWN_SERVER_ERROR,
            };
        response.results.push(result);
    }
    response
}
