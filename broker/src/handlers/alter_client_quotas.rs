//! AlterClientQuotas (key 49), v0-1 (KIP-546): sets or removes quotas of user and client-id
//! entities (and their defaults) in the cluster metadata, each entry checked as Kafka's
//! controller checks it (`metadata::quotas`), committed (persisted on a single node, through
//! the quorum in a cluster) before the answer. `validate_only` checks without committing. One
//! result per entry, in request order.

use super::{error_fields, nth_result};
use crate::authorization::{AclOperation, Resource};
use crate::metadata::decide::MetadataChange;
use crate::metadata::quotas::{QuotaEntity, QuotaOps};
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 1);

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    // As Kafka: ALTER_CONFIGS on the cluster, else every entry is refused.
    let refused = !node.allowed(context, AclOperation::AlterConfigs, Resource::Cluster);
    let checked: Vec<_> = request
        .entries
        .iter()
        .map(|entry| {
            if refused {
                return Err(crate::error::BrokerError::ClusterAuthorizationFailed);
            }
            let components: Vec<(String, Option<String>)> = entry
                .entity
                .iter()
                .map(|part| {
                    (part.entity_type.to_string(), part.entity_name.as_ref().map(|n| n.to_string()))
                })
                .collect();
            let ops: QuotaOps = entry
                .ops
                .iter()
                .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
                .collect();
            QuotaEntity::from_components(&components).map(|entity| (entity, ops))
        })
        .collect();
    let valid: Vec<_> = checked
        .iter()
        .filter_map(|outcome| outcome.as_ref().ok())
        .map(|(entity, ops)| (entity.clone(), ops.clone(), request.validate_only))
        .collect();
    let results = if valid.is_empty() {
        Vec::new()
    } else {
        node.metadata_router.change(MetadataChange::AlterQuotas(valid)).await
    };
    let mut response = AlterClientQuotasResponse::default();
    let mut next_result = 0;
    for (entry, outcome) in request.entries.iter().zip(checked) {
        let mut answer = EntryData::default();
        answer.entity = entry
            .entity
            .iter()
            .map(|part| {
                let mut entity = EntityData::default();
                entity.entity_type = part.entity_type.clone();
                entity.entity_name = part.entity_name.clone();
                entity
            })
            .collect();
        (answer.error_code, answer.error_message) = match outcome {
            Ok(_) => {
                next_result += 1;
                nth_result(&results, next_result - 1)
            }
            Err(error) => error_fields(&error),
        };
        if answer.error_code == 0 && !request.validate_only {
            tracing::info!(entity = ?answer.entity, "client quota altered");
        }
        response.entries.push(answer);
    }
    response
}
