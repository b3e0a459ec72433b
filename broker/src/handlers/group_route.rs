//! Routing for group requests: every group's membership lives on the shard that owns its
//! `__consumer_offsets` partition.

use crate::group::{self, OFFSETS_TOPIC};
use crate::router::{call, GroupAnswer, GroupCall, ShardRequest, ShardResponse};
use crate::state::Shard;
use std::rc::Rc;

pub async fn call_coordinator(
    shard: &Rc<Shard>,
    group_id: &str,
    request: GroupCall,
) -> Option<GroupAnswer> {
    let owner = shard.owner_of(OFFSETS_TOPIC, group::partition_for_group(group_id));
    match call(shard, owner, ShardRequest::Group(request)).await {
        ShardResponse::Group(answer) => Some(answer),
        _ => None,
    }
}
