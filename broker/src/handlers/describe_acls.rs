//! DescribeAcls (key 29), v1-3: the ACL bindings a filter matches (Kafka's
//! `AclBindingFilter`), grouped by resource pattern, from this broker's metadata image. Needs
//! DESCRIBE on the cluster; a filter with an UNKNOWN part is INVALID_REQUEST.

use super::{error_fields, str_bytes};
use crate::authorization::{AclOperation, Resource};
use crate::error::BrokerError;
use crate::metadata::acl::{AclFilter, PatternType, ResourceType};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use shard::io::Storage;
use std::collections::BTreeMap;

pub const VERSIONS: (i16, i16) = (1, 3);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeAclsRequest,
) -> DescribeAclsResponse {
    let mut response = DescribeAclsResponse::default();
    if !node.allowed(context, AclOperation::Describe, Resource::Cluster) {
        (response.error_code, response.error_message) =
            error_fields(&BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    let filter = AclFilter::from_wire(
        request.resource_type_filter,
        request.resource_name_filter.as_deref(),
        request.pattern_type_filter,
        request.principal_filter.as_deref(),
        request.host_filter.as_deref(),
        request.operation,
        request.permission_type,
    );
    let filter = match filter {
        Ok(filter) => filter,
        Err(error) => {
            (response.error_code, response.error_message) = error_fields(&error);
            return response;
        }
    };
    let image = node.metadata();
    let mut resources: BTreeMap<(ResourceType, PatternType, &str), Vec<AclDescription>> =
        BTreeMap::new();
    for (_, binding) in image.acls.iter().filter(|(_, binding)| filter.matches(binding)) {
        let mut acl = AclDescription::default();
        acl.principal = str_bytes(&binding.principal);
        acl.host = str_bytes(&binding.host);
        acl.operation = binding.operation.code();
        acl.permission_type = binding.permission.code();
        resources
            .entry((binding.resource_type, binding.pattern_type, &binding.resource_name))
            .or_default()
            .push(acl);
    }
    response.resources = resources
        .into_iter()
        .map(|((kind, pattern, name), acls)| {
            let mut resource = DescribeAclsResource::default();
            resource.resource_type = kind.code();
            resource.resource_name = str_bytes(name);
            resource.pattern_type = pattern.code();
            resource.acls = acls;
            resource
        })
        .collect();
    response
}
