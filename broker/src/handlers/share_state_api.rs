//! The share coordinator's inter-broker APIs (KIP-932): InitializeShareGroupState (83),
//! ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86) and
//! ReadShareGroupStateSummary (87: the start offset and epochs, without the batches and
//! without fencing, as Kafka's group coordinator reads it for DescribeShareGroupOffsets), each
//! for the share partitions whose `__share_group_state` partition this broker leads.
//! A share partition's leader on another broker sends them (`routers::share_state`); a
//! leader on this broker reaches the coordinator over the mesh instead. CLUSTER_ACTION on the
//! cluster is required, as Kafka requires it. A state never initialized is read back as state
//! epoch -1 and start offset -1 with no error (strata's leaders then initialize it).
//! One module for the five: they share the routing and the error answers.
//! References: KIP-932 ("Share group state RPCs"); Kafka `KafkaApis.handleReadShareGroupState`
//! and its siblings.

use crate::authorization::{AclOperation, Resource};
use crate::error::{error_code, BrokerError, GroupError};
use crate::node::Node;
use crate::request_context::RequestContext;
use crate::routers::share_state::state_of_id;
use crate::services::share_state::records::StateKey;
use crate::services::share_state::requests::{DeleteState, ReadState, WriteState};
use crate::services::share_state::{state_partition, ShareStateService};
use crate::services::shares::state::{Persisted, StateBatch};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 0);

fn key_of(group: &StrBytes, topic_id: &uuid::Uuid, partition: i32) -> StateKey {
    (group.to_string(), *topic_id.as_bytes(), partition)
}

/// Runs `request` on the shard that coordinates `key`'s state.
async fn on_coordinator<S: Storage, R: crate::mesh::Ask>(
    node: &Node<S>,
    context: &RequestContext,
    key: &StateKey,
    request: R,
) -> Result<R::Answer, BrokerError>
where
    ShareStateService<S>: crate::mesh::Answers<R>,
{
    if !node.allowed(context, AclOperation::ClusterAction, Resource::Cluster) {
        return Err(BrokerError::ClusterAuthorizationFailed);
    }
    if key.2 < 0 || key.0.is_empty() {
        return Err(BrokerError::InvalidRequest("a group and a partition are required".into()));
    }
    let shard = node.partitions.owner(&state_partition(key)).map_err(|error| match error {
        BrokerError::NotLeader(_) => BrokerError::Group(GroupError::NotCoordinator),
        _ => BrokerError::Group(GroupError::CoordinatorNotAvailable),
    })?;
    Ok(node.mesh.call::<ShareStateService<S>, R>(shard, request).await?)
}

fn coded(outcome: &Result<(), BrokerError>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err(error) => (error_code(error), Some(StrBytes::from_string(error.to_string()))),
    }
}

pub async fn read<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ReadShareGroupStateRequest,
) -> ReadShareGroupStateResponse {
    let mut response = ReadShareGroupStateResponse::default();
    for topic in request.topics {
        let mut result = read_share_group_state_response::ReadStateResult::default();
        result.topic_id = topic.topic_id;
        for partition in topic.partitions {
            let key = key_of(&request.group_id, &topic.topic_id, partition.partition);
            let call = ReadState { key: key.clone(), leader_epoch: partition.leader_epoch };
            let outcome = match on_coordinator(node, context, &key, call).await {
                Ok(answer) => answer,
                Err(error) => Err(error),
            };
            let mut out = read_share_group_state_response::PartitionResult::default();
            out.partition = partition.partition;
            match outcome {
                Ok(Some(stored)) => {
                    let state = stored.state;
                    out.state_epoch = stored.state_epoch;
                    out.start_offset = state.start_offset;
                    out.state_batches = state
                        .batches
                        .iter()
                        .map(|batch| {
                            let mut wire = read_share_group_state_response::StateBatch::default();
                            wire.first_offset = batch.first_offset;
                            wire.last_offset = batch.last_offset;
                            wire.delivery_state = batch.state.id();
                            wire.delivery_count = batch.delivery_count;
                            wire
                        })
                        .collect();
                }
                Ok(None) => {
                    out.state_epoch = -1;
                    out.start_offset = -1;
                }
                Err(error) => {
                    (out.error_code, out.error_message) = coded(&Err(error));
                }
            }
            result.partitions.push(out);
        }
        response.results.push(result);
    }
    response
}

pub async fn write<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: WriteShareGroupStateRequest,
) -> WriteShareGroupStateResponse {
    let mut response = WriteShareGroupStateResponse::default();
    for topic in request.topics {
        let mut result = write_share_group_state_response::WriteStateResult::default();
        result.topic_id = topic.topic_id;
        for partition in topic.partitions {
            let key = key_of(&request.group_id, &topic.topic_id, partition.partition);
            let batches: Option<Vec<StateBatch>> = partition
                .state_batches
                .iter()
                .map(|batch| {
                    Some(StateBatch {
                        first_offset: batch.first_offset,
                        last_offset: batch.last_offset,
                        state: state_of_id(batch.delivery_state)?,
                        delivery_count: batch.delivery_count,
                    })
                })
                .collect();
            let outcome = match batches {
                None => Err(BrokerError::InvalidRequest("an unknown delivery state".into())),
                Some(batches) => {
                    let state = Persisted { start_offset: partition.start_offset, batches };
                    let call = WriteState {
                        key: key.clone(),
                        leader_epoch: partition.leader_epoch,
                        state_epoch: partition.state_epoch,
                        state,
                        initialize: false,
                    };
                    on_coordinator(node, context, &key, call).await.and_then(|answer| answer)
                }
            };
            let mut out = write_share_group_state_response::PartitionResult::default();
            out.partition = partition.partition;
            (out.error_code, out.error_message) = coded(&outcome);
            result.partitions.push(out);
        }
        response.results.push(result);
    }
    response
}

pub async fn initialize<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: InitializeShareGroupStateRequest,
) -> InitializeShareGroupStateResponse {
    let mut response = InitializeShareGroupStateResponse::default();
    for topic in request.topics {
        let mut result = initialize_share_group_state_response::InitializeStateResult::default();
        result.topic_id = topic.topic_id;
        for partition in topic.partitions {
            let key = key_of(&request.group_id, &topic.topic_id, partition.partition);
            let state = Persisted { start_offset: partition.start_offset.max(0), batches: vec![] };
            let call = WriteState {
                key: key.clone(),
                leader_epoch: -1,
                state_epoch: partition.state_epoch,
                state,
                initialize: true,
            };
            let outcome = on_coordinator(node, context, &key, call).await.and_then(|a| a);
            let mut out = initialize_share_group_state_response::PartitionResult::default();
            out.partition = partition.partition;
            (out.error_code, out.error_message) = coded(&outcome);
            result.partitions.push(out);
        }
        response.results.push(result);
    }
    response
}

pub async fn delete<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: DeleteShareGroupStateRequest,
) -> DeleteShareGroupStateResponse {
    let mut response = DeleteShareGroupStateResponse::default();
    for topic in request.topics {
        let mut result = delete_share_group_state_response::DeleteStateResult::default();
        result.topic_id = topic.topic_id;
        for partition in topic.partitions {
            let key = key_of(&request.group_id, &topic.topic_id, partition.partition);
            let call = DeleteState { key: key.clone() };
            let outcome = on_coordinator(node, context, &key, call).await.and_then(|a| a);
            let mut out = delete_share_group_state_response::PartitionResult::default();
            out.partition = partition.partition;
            (out.error_code, out.error_message) = coded(&outcome);
            result.partitions.push(out);
        }
        response.results.push(result);
    }
    response
}

pub async fn summary<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    request: ReadShareGroupStateSummaryRequest,
) -> ReadShareGroupStateSummaryResponse {
    let mut response = ReadShareGroupStateSummaryResponse::default();
    for topic in request.topics {
        let mut result = read_share_group_state_summary_response::ReadStateSummaryResult::default();
        result.topic_id = topic.topic_id;
        for partition in topic.partitions {
            let key = key_of(&request.group_id, &topic.topic_id, partition.partition);
            // A negative leader epoch reads without fencing and writes nothing.
            let call = ReadState { key: key.clone(), leader_epoch: -1 };
            let outcome = on_coordinator(node, context, &key, call).await.and_then(|a| a);
            let mut out = read_share_group_state_summary_response::PartitionResult::default();
            out.partition = partition.partition;
            (out.state_epoch, out.leader_epoch, out.start_offset) = (-1, -1, -1);
            match outcome {
                Ok(Some(stored)) => {
                    out.state_epoch = stored.state_epoch;
                    out.leader_epoch = stored.leader_epoch;
                    out.start_offset = stored.state.start_offset;
                }
                Ok(None) => {}
                Err(error) => (out.error_code, out.error_message) = coded(&Err(error)),
            }
            result.partitions.push(out);
        }
        response.results.push(result);
    }
    response
}
