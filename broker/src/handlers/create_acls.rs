//! CreateAcls (key 30), v1-3: adds ACL bindings to the cluster metadata (KIP-801's
//! AccessControlEntryRecord), each checked as Kafka's controller checks a new ACL
//! (`metadata::acl`), committed (persisted on a single node, through the quorum in a cluster)
//! before the answer. An ACL equal to a stored one is a success that adds nothing. Needs ALTER
//! on the cluster. One result per creation, in request order.

use super::{error_fields, nth_result};
use crate::authorization::{AclOperation, Resource};
use crate::error::BrokerError;
use crate::metadata::acl::AclBinding;
use crate::metadata::decide::MetadataChange;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (1, 3);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: CreateAclsRequest,
) -> CreateAclsResponse {
    let mut response = CreateAclsResponse::default();
    if !node.allowed(context, AclOperation::Alter, Resource::Cluster) {
        let (code, message) = error_fields(&BrokerError::ClusterAuthorizationFailed);
        response.results = request
            .creations
            .iter()
            .map(|_| {
                let mut result = AclCreationResult::default();
                (result.error_code, result.error_message) = (code, message.clone());
                result
            })
            .collect();
        return response;
    }
    let checked: Vec<_> = request
        .creations
        .iter()
        .map(|creation| {
            AclBinding::from_wire(
                creation.resource_type,
                &creation.resource_name,
                creation.resource_pattern_type,
                &creation.principal,
                &creation.host,
                creation.operation,
                creation.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclBinding> =
        checked.iter().filter_map(|outcome| outcome.as_ref().ok()).cloned().collect();
    let results = if valid.is_empty() {
        Vec::new()
    } else {
        node.metadata_router.change(MetadataChange::CreateAcls(valid)).await
    };
    let mut next_result = 0;
    for outcome in checked {
        let mut result = AclCreationResult::default();
        (result.error_code, result.error_message) = match outcome {
            Ok(binding) => {
                next_result += 1;
                let fields = nth_result(&results, next_result - 1);
                if fields.0 == 0 {
                    tracing::info!(principal = %context.principal, ?binding, "ACL created");
                }
                fields
            }
            Err(error) => error_fields(&error),
        };
        response.results.push(result);
    }
    response
}
