//! DeleteTopics (key 20): applied by shard 0; owner shards close the partitions and remove
//! their directories. v6 names topics by name or by id; an id no topic has is answered
//! UNKNOWN_TOPIC_ID with the id and no name, as Kafka's controller does.

use super::{error_fields, nth_result};
use crate::authorization::{AclOperation, Resource};
use crate::error::BrokerError;
use crate::metadata::decide::MetadataChange;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (1, 6);

/// One topic of the request: its name, or the id that named no topic.
enum Named {
    Name(String),
    UnknownId(uuid::Uuid),
    /// The principal may not delete it.
    Refused(String),
}

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let version = context.api_version;
    let image = node.metadata();
    let named: Vec<Named> = if version >= 6 {
        let resolve =
            |topic: &kafka_protocol::messages::delete_topics_request::DeleteTopicState| match &topic
                .name
            {
                Some(name) => Named::Name(name.0.to_string()),
                None => image
                    .topic_by_id(topic.topic_id.as_bytes())
                    .map_or(Named::UnknownId(topic.topic_id), |meta| {
                        Named::Name(meta.name.clone())
                    }),
            };
        request.topics.iter().map(resolve).collect()
    } else {
        request.topic_names.iter().map(|name| Named::Name(name.0.to_string())).collect()
    };
    // As Kafka: DELETE on each topic.
    let named: Vec<Named> = named
        .into_iter()
        .map(|named| match named {
            Named::Name(name)
                if !node.allowed(context, AclOperation::Delete, Resource::Topic(&name)) =>
            {
                Named::Refused(name)
            }
            other => other,
        })
        .collect();
    let names: Vec<String> = named
        .iter()
        .filter_map(|named| match named {
            Named::Name(name) => Some(name.clone()),
            Named::UnknownId(_) | Named::Refused(_) => None,
        })
        .collect();
    let results = if names.is_empty() {
        Vec::new()
    } else {
        node.metadata_router.change(MetadataChange::DeleteTopics(names)).await
    };
    let mut response = DeleteTopicsResponse::default();
    let mut next_result = 0;
    for named in named {
        let mut result = DeletableTopicResult::default();
        let (error_code, message) = match named {
            Named::UnknownId(id) => {
                result.name = None;
                result.topic_id = id;
                error_fields(&BrokerError::UnknownTopicId(id.to_string()))
            }
            Named::Refused(name) => {
                let error = BrokerError::TopicAuthorizationFailed(name.clone());
                result.name = Some(TopicName(StrBytes::from_string(name)));
                error_fields(&error)
            }
            Named::Name(name) => {
                if let (Some(meta), true) = (image.topic(&name), version >= 6) {
                    result.topic_id = uuid::Uuid::from_bytes(meta.topic_id);
                }
                result.name = Some(TopicName(StrBytes::from_string(name)));
                next_result += 1;
                nth_result(&results, next_result - 1)
            }
        };
        result.error_code = error_code;
        if version >= 5 {
            result.error_message = message;
        }
        response.responses.push(result);
    }
    response
}
