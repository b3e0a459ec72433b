//! AlterConfigs (key 33): replaces a topic's config overrides (the legacy, non-incremental API).

use super::describe_configs::RESOURCE_TOPIC;
use super::nth_result;
use crate::error::code;
use crate::router::{request_change, ConfigEdit, MetadataChange};
use crate::state::Shard;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use std::rc::Rc;

pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle(shard: &Rc<Shard>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
    for resource in request.resources {
        let mut result = AlterConfigsResourceResponse::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        if resource.resource_type != RESOURCE_TOPIC {
            result.error_code = code::INVALID_REQUEST;
            result.error_message = Some(super::str_bytes("only topic configs can be altered"));
            response.responses.push(result);
            continue;
        }
        let configs = resource
            .configs
            .iter()
            .filter_map(|config| {
                config.value.as_ref().map(|value| (config.name.to_string(), value.to_string()))
            })
            .collect();
        let change = MetadataChange::AlterConfigs(vec![(
            resource.resource_name.to_string(),
            ConfigEdit::Replace(configs),
            request.validate_only,
        )]);
        let results = request_change(shard, change).await;
        (result.error_code, result.error_message) = nth_result(&results, 0);
        response.responses.push(result);
    }
    response
}
