//! DescribeClientQuotas (key 48), v0-1 (KIP-546): the quotas of the entities matching the
//! filter (per component: an exact name, the default, or any name; `strict`: no other entity
//! types), from this broker's metadata image (`metadata::quotas::describe`). A bad filter is
//! INVALID_REQUEST for the whole request, as Kafka answers.

use super::{error_fields, str_bytes};
use crate::authorization::{AclOperation, Resource};
use crate::error::NONE;
use crate::metadata::quotas::Match;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 1);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    if !node.allowed(context, AclOperation::DescribeConfigs, Resource::Cluster) {
        let mut response = DescribeClientQuotasResponse::default();
        response.error_code =
            crate::error::error_code(&crate::error::BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    let mut response = DescribeClientQuotasResponse::default();
    let mut components = Vec::new();
    for component in &request.components {
        let matched = match (component.match_type, &component._match) {
            (0, Some(name)) => Match::Exact(name.to_string()),
            (1, _) => Match::Default,
            (2, _) => Match::Specified,
            (kind, _) => {
                let error = crate::error::BrokerError::InvalidRequest(format!(
                    "Invalid match type {kind} (or an exact match without a name)"
                ));
                (response.error_code, response.error_message) = error_fields(&error);
                return response;
            }
        };
        components.push((component.entity_type.to_string(), matched));
    }
    match crate::metadata::quotas::describe(&node.metadata(), &components, request.strict) {
        Ok(found) => {
            response.error_code = NONE;
            response.entries = Some(
                found
                    .into_iter()
                    .map(|(entity, values)| {
                        let mut entry = EntryData::default();
                        entry.entity = entity
                            .components()
                            .into_iter()
                            .map(|(kind, name)| {
                                let mut part = EntityData::default();
                                part.entity_type = str_bytes(kind);
                                part.entity_name = name.as_deref().map(str_bytes);
                                part
                            })
                            .collect();
                        entry.values = values
                            .into_iter()
                            .map(|(key, value)| {
                                let mut data = ValueData::default();
                                data.key = str_bytes(&key);
                                data.value = value;
                                data
                            })
                            .collect();
                        entry
                    })
                    .collect(),
            );
        }
        Err(error) => (response.error_code, response.error_message) = error_fields(&error),
    }
    response
}
