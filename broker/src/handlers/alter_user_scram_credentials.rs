//! AlterUserScramCredentials (key 51), v0 (KIP-554): sets or deletes users' SCRAM credentials
//! in the cluster metadata. The request is checked per user (`metadata::scram::
//! check_alterations`: Kafka's DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL and
//! UNSUPPORTED_SASL_MECHANISM), the rest decided and committed as metadata records (persisted on
//! a single node, through the controller quorum in a cluster) before the answer, so a user
//! created here can log in at once on this broker, and on every broker once it has the image.
//! The salted password becomes StoredKey and ServerKey here: it is never stored. One result per
//! user, in request order.

use super::{error_fields, nth_result, str_bytes};
use crate::authorization::{AclOperation, Resource};
use crate::metadata::decide::MetadataChange;
use crate::metadata::scram::{check_alterations, RequestedAlteration, ScramCredentialInput};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let deletions = request.deletions.iter().map(|deletion| -> RequestedAlteration {
        (deletion.name.to_string(), deletion.mechanism, None)
    });
    let upsertions = request.upsertions.iter().map(|upsertion| -> RequestedAlteration {
        let input = ScramCredentialInput {
            salt: upsertion.salt.to_vec(),
            salted_password: upsertion.salted_password.to_vec(),
        };
        (upsertion.name.to_string(), upsertion.mechanism, Some((upsertion.iterations, input)))
    });
    let mut checked = check_alterations(deletions.chain(upsertions).collect());
    // As Kafka: ALTER on the cluster, else every user's alteration is refused.
    if !node.allowed(context, AclOperation::Alter, Resource::Cluster) {
        for (_, outcome) in checked.iter_mut() {
            *outcome = Err(crate::error::BrokerError::ClusterAuthorizationFailed);
        }
    }
    let valid: Vec<_> = checked
        .iter()
        .filter_map(|(user, outcome)| Some((user.clone(), outcome.as_ref().ok()?.clone())))
        .collect();
    let results = if valid.is_empty() {
        Vec::new()
    } else {
        node.metadata_router.change(MetadataChange::AlterScram(valid)).await
    };
    let mut response = AlterUserScramCredentialsResponse::default();
    let mut next_result = 0;
    for (user, outcome) in checked {
        let mut result = AlterUserScramCredentialsResult::default();
        result.user = str_bytes(&user);
        (result.error_code, result.error_message) = match outcome {
            Ok(_) => {
                next_result += 1;
                let (code, message) = nth_result(&results, next_result - 1);
                (code, if code == 0 { None } else { message })
            }
            Err(error) => error_fields(&error),
        };
        if result.error_code == 0 {
            tracing::info!(%user, "SCRAM credential altered");
        }
        response.results.push(result);
    }
    response
}
