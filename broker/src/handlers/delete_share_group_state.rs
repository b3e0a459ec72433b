//! DeleteShareGroupState (key 86, KIP-932, inter-broker): a share partition's state deleted. The share coordinator's APIs share one
//! implementation (`share_state_api`).

use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::{DeleteShareGroupStateRequest, DeleteShareGroupStateResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = super::share_state_api::VERSIONS;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DeleteShareGroupStateRequest,
) -> DeleteShareGroupStateResponse {
    super::share_state_api::delete(node, context, request).await
}
