//! IncrementalAlterConfigs (key 44, KIP-339): SET, DELETE, APPEND and SUBTRACT on topic config
//! overrides, on dynamic broker configs (the BROKER resource) and on group configs (GROUP,
//! KIP-848).

use super::alter_configs::alter_topic;
use crate::metadata::decide::ConfigEdit;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 1);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in request.resources {
        let operations = resource
            .configs
            .iter()
            .map(|config| {
                (
                    config.name.to_string(),
                    config.config_operation,
                    config.value.as_ref().map(|v| v.to_string()),
                )
            })
            .collect();
        let mut result = AlterConfigsResourceResponse::default();
        (result.error_code, result.error_message) = alter_topic(
            node,
            context,
            resource.resource_type,
            &resource.resource_name,
            ConfigEdit::Incremental(operations),
            request.validate_only,
        )
        .await;
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name;
        response.responses.push(result);
    }
    response
}
