//! DeleteAcls (key 31), v1-3: removes the ACLs each filter matches (Kafka's
//! `AclBindingFilter`) from the cluster metadata, committed before the answer, and answers
//! each filter with the bindings it removed. Needs ALTER on the cluster; a filter with an
//! UNKNOWN part is INVALID_REQUEST (that filter only).

use super::{error_fields, nth_result, str_bytes};
use crate::authorization::{AclOperation, Resource};
use crate::error::BrokerError;
use crate::metadata::acl::{AclFilter, AclId};
use crate::metadata::acls;
use crate::metadata::decide::MetadataChange;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (1, 3);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let mut response = DeleteAclsResponse::default();
    if !node.allowed(context, AclOperation::Alter, Resource::Cluster) {
        let (code, message) = error_fields(&BrokerError::ClusterAuthorizationFailed);
        response.filter_results = request
            .filters
            .iter()
            .map(|_| {
                let mut result = DeleteAclsFilterResult::default();
                (result.error_code, result.error_message) = (code, message.clone());
                result
            })
            .collect();
        return response;
    }
    let image = node.metadata();
    let matched: Vec<_> = request
        .filters
        .iter()
        .map(|filter| {
            AclFilter::from_wire(
                filter.resource_type_filter,
                filter.resource_name_filter.as_deref(),
                filter.pattern_type_filter,
                filter.principal_filter.as_deref(),
                filter.host_filter.as_deref(),
                filter.operation,
                filter.permission_type,
            )
            .map(|filter| acls::matching(&image.acls, &filter))
        })
        .collect();
    let ids: Vec<Vec<AclId>> = matched
        .iter()
        .filter_map(|outcome| outcome.as_ref().ok())
        .map(|found| found.iter().map(|(id, _)| *id).collect())
        .collect();
    let results = if ids.iter().all(Vec::is_empty) {
        ids.iter().map(|_| Ok(())).collect()
    } else {
        node.metadata_router.change(MetadataChange::DeleteAcls(ids)).await
    };
    let mut next_result = 0;
    for outcome in matched {
        let mut result = DeleteAclsFilterResult::default();
        match outcome {
            Ok(found) => {
                next_result += 1;
                (result.error_code, result.error_message) = nth_result(&results, next_result - 1);
                if result.error_code == 0 {
                    result.matching_acls = found
                        .iter()
                        .map(|(_, binding)| {
                            tracing::info!(principal = %context.principal, ?binding, "ACL deleted");
                            let mut acl = DeleteAclsMatchingAcl::default();
                            acl.resource_type = binding.resource_type.code();
                            acl.resource_name = str_bytes(&binding.resource_name);
                            acl.pattern_type = binding.pattern_type.code();
                            acl.principal = str_bytes(&binding.principal);
                            acl.host = str_bytes(&binding.host);
                            acl.operation = binding.operation.code();
                            acl.permission_type = binding.permission.code();
                            acl
                        })
                        .collect();
                }
            }
            Err(error) => (result.error_code, result.error_message) = error_fields(&error),
        }
        response.filter_results.push(result);
    }
    response
}
