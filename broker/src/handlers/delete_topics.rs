//! DeleteTopics (key 20): applied by shard 0; owner shards close the partitions and remove
//! their directories. Topics are named (v6 topic-id deletes resolve the id to a name).

use super::nth_result;
use crate::metadata::decide::MetadataChange;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (1, 6);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let version = context.api_version;
    let image = node.metadata();
    let names: Vec<String> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|topic| match &topic.name {
                Some(name) => name.0.to_string(),
                None => image
                    .topic_by_id(topic.topic_id.as_bytes())
                    .map(|meta| meta.name.clone())
                    .unwrap_or_default(),
            })
            .collect()
    } else {
        request.topic_names.iter().map(|name| name.0.to_string()).collect()
    };
    let results = node.change_metadata(MetadataChange::DeleteTopics(names.clone())).await;
    let mut response = DeleteTopicsResponse::default();
    for (index, name) in names.iter().enumerate() {
        let mut result = DeletableTopicResult::default();
        result.name = Some(TopicName(super::str_bytes(name)));
        if let (Some(meta), true) = (image.topic(name), version >= 6) {
            result.topic_id = uuid::Uuid::from_bytes(meta.topic_id);
        }
        let (error_code, message) = nth_result(&results, index);
        result.error_code = error_code;
        if version >= 5 {
            result.error_message = message;
        }
        response.responses.push(result);
    }
    response
}
