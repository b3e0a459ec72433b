//! InitializeShareGroupState (key 83, KIP-932, inter-broker): a share partition's first state (its start offset). The share coordinator's APIs share one
//! implementation (`share_state_api`).

use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::{
    InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = super::share_state_api::VERSIONS;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: InitializeShareGroupStateRequest,
) -> InitializeShareGroupStateResponse {
    super::share_state_api::initialize(node, context, request).await
}
