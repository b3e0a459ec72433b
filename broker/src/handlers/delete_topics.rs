//! DeleteTopics (key 20): applied by shard 0; owner shards close the partitions and remove
//! their directories. Topics are named (v6 topic-id deletes resolve the id to a name).

use super::nth_result;
use crate::router::{request_change, MetadataChange};
use crate::state::Shard;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (1, 6);

pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let snapshot = shard.snapshot();
    let names: Vec<String> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|topic| match &topic.name {
                Some(name) => name.0.to_string(),
                None => snapshot
                    .topics
                    .values()
                    .find(|meta| uuid::Uuid::from_bytes(meta.topic_id) == topic.topic_id)
                    .map(|meta| meta.name.clone())
                    .unwrap_or_default(),
            })
            .collect()
    } else {
        request.topic_names.iter().map(|name| name.0.to_string()).collect()
    };
    let results = request_change(shard, MetadataChange::DeleteTopics(names.clone())).await;
    let mut response = DeleteTopicsResponse::default();
    for (index, name) in names.iter().enumerate() {
        let mut result = DeletableTopicResult::default();
        result.name = Some(TopicName(super::str_bytes(name)));
        if let (Some(meta), true) = (snapshot.topics.get(name), version >= 6) {
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
