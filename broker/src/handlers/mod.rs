//! Kafka API handlers: one module per API, each declaring the versions it supports
//! (`VERSIONS`) and its `handle` function. `ApiVersions` is built from these ranges.
//!
//! Invariant: only handlers produce Kafka error codes (through `error::error_code`).
//! References: Kafka protocol guide, one section per API.

pub mod alter_configs;
pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod fetch;
pub mod find_coordinator;
mod group_route;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod produce;
pub mod sync_group;

use crate::state::Shard;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use std::rc::Rc;

/// (API, min version, max version) for every API strata serves.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, produce::VERSIONS.0, produce::VERSIONS.1),
    (ApiKey::Fetch, fetch::VERSIONS.0, fetch::VERSIONS.1),
    (ApiKey::ListOffsets, list_offsets::VERSIONS.0, list_offsets::VERSIONS.1),
    (ApiKey::Metadata, metadata::VERSIONS.0, metadata::VERSIONS.1),
    (ApiKey::ApiVersions, api_versions::VERSIONS.0, api_versions::VERSIONS.1),
    (ApiKey::CreateTopics, create_topics::VERSIONS.0, create_topics::VERSIONS.1),
    (ApiKey::DeleteTopics, delete_topics::VERSIONS.0, delete_topics::VERSIONS.1),
    (ApiKey::DeleteRecords, delete_records::VERSIONS.0, delete_records::VERSIONS.1),
    (ApiKey::DescribeConfigs, describe_configs::VERSIONS.0, describe_configs::VERSIONS.1),
    (ApiKey::AlterConfigs, alter_configs::VERSIONS.0, alter_configs::VERSIONS.1),
    (ApiKey::CreatePartitions, create_partitions::VERSIONS.0, create_partitions::VERSIONS.1),
    (
        ApiKey::IncrementalAlterConfigs,
        incremental_alter_configs::VERSIONS.0,
        incremental_alter_configs::VERSIONS.1,
    ),
    (ApiKey::DescribeCluster, describe_cluster::VERSIONS.0, describe_cluster::VERSIONS.1),
    (ApiKey::FindCoordinator, find_coordinator::VERSIONS.0, find_coordinator::VERSIONS.1),
    (ApiKey::OffsetCommit, offset_commit::VERSIONS.0, offset_commit::VERSIONS.1),
    (ApiKey::OffsetFetch, offset_fetch::VERSIONS.0, offset_fetch::VERSIONS.1),
    (ApiKey::ListGroups, list_groups::VERSIONS.0, list_groups::VERSIONS.1),
    (ApiKey::JoinGroup, join_group::VERSIONS.0, join_group::VERSIONS.1),
    (ApiKey::SyncGroup, sync_group::VERSIONS.0, sync_group::VERSIONS.1),
    (ApiKey::Heartbeat, heartbeat::VERSIONS.0, heartbeat::VERSIONS.1),
    (ApiKey::LeaveGroup, leave_group::VERSIONS.0, leave_group::VERSIONS.1),
    (ApiKey::DescribeGroups, describe_groups::VERSIONS.0, describe_groups::VERSIONS.1),
    (ApiKey::DeleteGroups, delete_groups::VERSIONS.0, delete_groups::VERSIONS.1),
    (ApiKey::OffsetDelete, offset_delete::VERSIONS.0, offset_delete::VERSIONS.1),
    (ApiKey::InitProducerId, init_producer_id::VERSIONS.0, init_producer_id::VERSIONS.1),
    (ApiKey::DescribeLogDirs, describe_log_dirs::VERSIONS.0, describe_log_dirs::VERSIONS.1),
    (ApiKey::DescribeProducers, describe_producers::VERSIONS.0, describe_producers::VERSIONS.1),
];

/// Whether `version` of `api_key` is served.
pub fn supports(api_key: ApiKey, version: i16) -> bool {
    SUPPORTED.iter().any(|&(key, min, max)| key == api_key && (min..=max).contains(&version))
}

/// Runs the handler for a decoded request. `None` means no response is sent (acks=0 produce).
pub async fn handle(
    shard: &Rc<Shard>,
    version: i16,
    header: &kafka_protocol::messages::RequestHeader,
    request: RequestKind,
) -> Option<ResponseKind> {
    Some(match request {
        RequestKind::ApiVersions(request) => {
            ResponseKind::ApiVersions(api_versions::handle(version, request))
        }
        RequestKind::Metadata(request) => {
            ResponseKind::Metadata(metadata::handle(shard, version, request).await)
        }
        RequestKind::Produce(request) => {
            return produce::handle(shard, version, request).await.map(ResponseKind::Produce)
        }
        RequestKind::Fetch(request) => {
            ResponseKind::Fetch(fetch::handle(shard, version, request).await)
        }
        RequestKind::ListOffsets(request) => {
            ResponseKind::ListOffsets(list_offsets::handle(shard, version, request).await)
        }
        RequestKind::CreateTopics(request) => {
            ResponseKind::CreateTopics(create_topics::handle(shard, version, request).await)
        }
        RequestKind::DeleteTopics(request) => {
            ResponseKind::DeleteTopics(delete_topics::handle(shard, version, request).await)
        }
        RequestKind::CreatePartitions(request) => {
            ResponseKind::CreatePartitions(create_partitions::handle(shard, request).await)
        }
        RequestKind::DescribeConfigs(request) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(shard, version, request))
        }
        RequestKind::AlterConfigs(request) => {
            ResponseKind::AlterConfigs(alter_configs::handle(shard, request).await)
        }
        RequestKind::IncrementalAlterConfigs(request) => ResponseKind::IncrementalAlterConfigs(
            incremental_alter_configs::handle(shard, request).await,
        ),
        RequestKind::DeleteRecords(request) => {
            ResponseKind::DeleteRecords(delete_records::handle(shard, request).await)
        }
        RequestKind::DescribeCluster(request) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(shard, version, request))
        }
        RequestKind::FindCoordinator(request) => {
            ResponseKind::FindCoordinator(find_coordinator::handle(shard, version, request))
        }
        RequestKind::OffsetCommit(request) => {
            ResponseKind::OffsetCommit(offset_commit::handle(shard, request).await)
        }
        RequestKind::OffsetFetch(request) => {
            ResponseKind::OffsetFetch(offset_fetch::handle(shard, version, request).await)
        }
        RequestKind::ListGroups(request) => {
            ResponseKind::ListGroups(list_groups::handle(shard, version, request).await)
        }
        RequestKind::JoinGroup(request) => {
            ResponseKind::JoinGroup(join_group::handle(shard, version, header, request).await)
        }
        RequestKind::SyncGroup(request) => {
            ResponseKind::SyncGroup(sync_group::handle(shard, version, request).await)
        }
        RequestKind::Heartbeat(request) => {
            ResponseKind::Heartbeat(heartbeat::handle(shard, request).await)
        }
        RequestKind::LeaveGroup(request) => {
            ResponseKind::LeaveGroup(leave_group::handle(shard, version, request).await)
        }
        RequestKind::DescribeGroups(request) => {
            ResponseKind::DescribeGroups(describe_groups::handle(shard, version, request).await)
        }
        RequestKind::DeleteGroups(request) => {
            ResponseKind::DeleteGroups(delete_groups::handle(shard, request).await)
        }
        RequestKind::OffsetDelete(request) => {
            ResponseKind::OffsetDelete(offset_delete::handle(shard, request).await)
        }
        RequestKind::DescribeProducers(request) => {
            ResponseKind::DescribeProducers(describe_producers::handle(shard, request).await)
        }
        RequestKind::DescribeLogDirs(request) => {
            ResponseKind::DescribeLogDirs(describe_log_dirs::handle(shard, version, request).await)
        }
        RequestKind::InitProducerId(request) => {
            ResponseKind::InitProducerId(init_producer_id::handle(shard, request).await)
        }
        _ => return None,
    })
}

/// Whether a group has committed offsets (for groups without members).
pub(crate) async fn offset_fetch_has_offsets(shard: &Rc<Shard>, group: &str) -> bool {
    let owner =
        shard.owner_of(crate::group::OFFSETS_TOPIC, crate::group::partition_for_group(group));
    let request =
        crate::router::ShardRequest::FetchOffsets { group: group.to_string(), wanted: None };
    matches!(crate::router::call(shard, owner, request).await, crate::router::ShardResponse::FetchOffsets(found) if !found.is_empty())
}

/// The `index`th result of a batched metadata change (a short answer means shard 0 failed).
pub(crate) fn nth_result(
    results: &[crate::error::Result<()>],
    index: usize,
) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match results.get(index).or(results.first()) {
        Some(Ok(())) => (crate::error::code::NONE, None),
        Some(Err(error)) => error_fields(error),
        None => (crate::error::code::UNKNOWN_SERVER_ERROR, None),
    }
}

/// Sends a partition's request to the shard that owns it, after checking the partition exists.
pub(crate) async fn call_owner(
    shard: &Rc<Shard>,
    topic: &str,
    partition: i32,
    request: crate::router::ShardRequest,
) -> crate::error::Result<crate::router::ShardResponse> {
    let known = shard
        .snapshot()
        .topics
        .get(topic)
        .is_some_and(|meta| partition >= 0 && partition < meta.partitions);
    if !known {
        return Err(crate::error::BrokerError::UnknownTopicOrPartition(format!(
            "{topic}-{partition}"
        )));
    }
    match crate::router::call(shard, shard.owner_of(topic, partition), request).await {
        crate::router::ShardResponse::Unavailable(reason) => {
            Err(crate::error::BrokerError::ShardUnavailable(reason))
        }
        response => Ok(response),
    }
}

fn unexpected() -> crate::error::BrokerError {
    crate::error::BrokerError::ShardUnavailable("unexpected answer from a shard".into())
}

/// (error_code, error_message) for a response.
pub(crate) fn error_fields(
    error: &crate::error::BrokerError,
) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    (
        crate::error::error_code(error),
        Some(kafka_protocol::protocol::StrBytes::from_string(error.to_string())),
    )
}

pub(crate) fn str_bytes(value: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(value.to_string())
}
