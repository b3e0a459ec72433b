//! AlterConfigs (key 33): replaces a topic's config overrides, or a BROKER resource's dynamic
//! configs, or a GROUP's configs (the legacy, non-incremental API).

use super::describe_configs::{group_defaults, RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC};
use super::{error_fields, nth_result};
use crate::authorization::{AclOperation, Resource};
use crate::error::BrokerError;
use crate::metadata::decide::{ConfigEdit, MetadataChange};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
    for resource in request.resources {
        let configs = resource
            .configs
            .iter()
            .filter_map(|config| {
                config.value.as_ref().map(|value| (config.name.to_string(), value.to_string()))
            })
            .collect();
        let mut result = AlterConfigsResourceResponse::default();
        (result.error_code, result.error_message) = alter_topic(
            node,
            context,
            resource.resource_type,
            &resource.resource_name,
            ConfigEdit::Replace(configs),
            request.validate_only,
        )
        .await;
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name;
        response.responses.push(result);
    }
    response
}

/// Applies one resource's edit for AlterConfigs and IncrementalAlterConfigs alike, to a topic,
/// to the BROKER resource (dynamic broker configs) or to a GROUP (group configs); the edit
/// goes through the metadata owner. Returns the response's error fields.
pub(super) async fn alter_topic<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    resource_type: i8,
    name: &str,
    edit: ConfigEdit,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    // As Kafka: ALTER_CONFIGS on the topic or the group, or on the cluster for the BROKER
    // resource.
    let refused = match resource_type {
        RESOURCE_TOPIC => {
            (!node.allowed(context, AclOperation::AlterConfigs, Resource::Topic(name)))
                .then(|| BrokerError::TopicAuthorizationFailed(name.to_string()))
        }
        RESOURCE_BROKER => (!node.allowed(context, AclOperation::AlterConfigs, Resource::Cluster))
            .then_some(BrokerError::ClusterAuthorizationFailed),
        RESOURCE_GROUP => {
            (!node.allowed(context, AclOperation::AlterConfigs, Resource::Group(name)))
                .then(|| BrokerError::GroupAuthorizationFailed(name.to_string()))
        }
        _ => None,
    };
    if let Some(error) = refused {
        return error_fields(&error);
    }
    let change = match resource_type {
        RESOURCE_TOPIC => {
            MetadataChange::AlterConfigs(vec![(name.to_string(), edit, validate_only)])
        }
        RESOURCE_BROKER => {
            let change = vec![(name.to_string(), edit, validate_only)];
            MetadataChange::AlterBrokerConfigs(node.config.node_id, change)
        }
        RESOURCE_GROUP => {
            let change = vec![(name.to_string(), edit, validate_only)];
            MetadataChange::AlterGroupConfigs(group_defaults(node), change)
        }
        other => {
            return error_fields(&BrokerError::InvalidRequest(format!(
                "configs of resource type {other} cannot be altered"
            )))
        }
    };
    nth_result(&node.metadata_router.change(change).await, 0)
}
