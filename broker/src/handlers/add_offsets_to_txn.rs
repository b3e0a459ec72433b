//! AddOffsetsToTxn (key 25): adds the group's `__consumer_offsets` partition to the
//! producer's transaction, so the offsets it commits in the transaction (TxnOffsetCommit) get
//! the transaction's marker. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.

use crate::authorization::{AclOperation, Resource};
use crate::error::{txn_error_code, BrokerError, GroupError, NONE};
use crate::metadata::internal::{partition_for_group, OFFSETS_TOPIC};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::services::groups::valid_group_id;
use crate::services::transactions::requests::AddPartitions;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use shard::io::Storage;
use wire::ids::TopicPartition;

pub const VERSIONS: (i16, i16) = (0, 3);
/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_VERSION: i16 = 2;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let mut response = AddOffsetsToTxnResponse::default();
    let group = request.group_id.0.to_string();
    let transactional_id = request.transactional_id.0.to_string();
    // As Kafka: WRITE on the transactional id, then READ on the group.
    let result = if !node.allowed(
        context,
        AclOperation::Write,
        Resource::TransactionalId(&transactional_id),
    ) {
        Err(BrokerError::TransactionalIdAuthorizationFailed(transactional_id))
    } else if !node.allowed(context, AclOperation::Read, Resource::Group(&group)) {
        Err(BrokerError::GroupAuthorizationFailed(group))
    } else if !valid_group_id(&group) {
        Err(BrokerError::Group(GroupError::InvalidGroupId))
    } else {
        let transactional_id = request.transactional_id.0.to_string();
        let call = AddPartitions {
            transactional_id: transactional_id.clone(),
            producer_id: request.producer_id.0,
            producer_epoch: request.producer_epoch,
            partitions: vec![TopicPartition::new(OFFSETS_TOPIC, partition_for_group(&group))],
        };
        node.transactions.call(&transactional_id, call).await.and_then(|added| added)
    };
    response.error_code = match result {
        Ok(()) => NONE,
        Err(error) => {
            tracing::debug!(%error, "AddOffsetsToTxn refused");
            txn_error_code(&error, context.api_version, PRODUCER_FENCED_VERSION)
        }
    };
    response
}
