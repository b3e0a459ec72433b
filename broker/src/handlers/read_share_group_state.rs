//! ReadShareGroupState (key 84, KIP-932, inter-broker): a share partition's persisted state, read by its leader. The share coordinator's APIs share one
//! implementation (`share_state_api`).

use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::{ReadShareGroupStateRequest, ReadShareGroupStateResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = super::share_state_api::VERSIONS;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ReadShareGroupStateRequest,
) -> ReadShareGroupStateResponse {
    super::share_state_api::read(node, context, request).await
}
