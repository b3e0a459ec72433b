//! WriteShareGroupState (key 85, KIP-932, inter-broker): a share partition's new state from its leader (refused from an older leader epoch). The share coordinator's APIs share one
//! implementation (`share_state_api`).

use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::{WriteShareGroupStateRequest, WriteShareGroupStateResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = super::share_state_api::VERSIONS;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: WriteShareGroupStateRequest,
) -> WriteShareGroupStateResponse {
    super::share_state_api::write(node, context, request).await
}
