//! ReadShareGroupStateSummary (key 87, KIP-932, inter-broker): a share partition's start
//! offset and epochs, read without fencing. The share coordinator's APIs share one
//! implementation (`share_state_api`).

use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::{
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = super::share_state_api::VERSIONS;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ReadShareGroupStateSummaryRequest,
) -> ReadShareGroupStateSummaryResponse {
    super::share_state_api::summary(node, context, request).await
}
