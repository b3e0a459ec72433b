//! DescribeUserScramCredentials (key 50), v0 (KIP-554): the SCRAM mechanisms and iterations of
//! the named users, or of every user with a credential when none is named, from this broker's
//! metadata image (`metadata::scram::describe`). Never the salt or the keys.

use super::{error_fields, str_bytes};
use crate::authorization::{AclOperation, Resource};
use crate::error::NONE;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !node.allowed(context, AclOperation::Describe, Resource::Cluster) {
        let mut response = DescribeUserScramCredentialsResponse::default();
        response.error_code =
            crate::error::error_code(&crate::error::BrokerError::ClusterAuthorizationFailed);
        return response;
    }
    let users = request.users.map(|users| users.iter().map(|u| u.name.to_string()).collect());
    let mut response = DescribeUserScramCredentialsResponse::default();
    response.error_code = NONE;
    for (user, outcome) in crate::metadata::scram::describe(&node.metadata(), users) {
        let mut result = DescribeUserScramCredentialsResult::default();
        result.user = str_bytes(&user);
        match outcome {
            Ok(infos) => {
                result.error_code = NONE;
                result.credential_infos = infos
                    .into_iter()
                    .map(|(mechanism, iterations)| {
                        let mut info = CredentialInfo::default();
                        info.mechanism = mechanism.code();
                        info.iterations = iterations;
                        info
                    })
                    .collect();
            }
            Err(error) => (result.error_code, result.error_message) = error_fields(&error),
        }
        response.results.push(result);
    }
    response
}
