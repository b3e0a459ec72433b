//! CreatePartitions (key 37): raises a topic's partition count (never lowers it).

use super::nth_result;
use crate::metadata::decide::MetadataChange;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 3);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    _context: &RequestContext,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let changes: Vec<(String, i32, bool)> = request
        .topics
        .iter()
        .map(|topic| (topic.name.0.to_string(), topic.count, request.validate_only))
        .collect();
    let results = node.change_metadata(MetadataChange::CreatePartitions(changes)).await;
    let mut response = CreatePartitionsResponse::default();
    for (index, topic) in request.topics.iter().enumerate() {
        let mut result = CreatePartitionsTopicResult::default();
        result.name = topic.name.clone();
        let (error_code, message) = nth_result(&results, index);
        result.error_code = error_code;
        result.error_message = message;
        response.results.push(result);
    }
    response
}
