//! Kafka API handlers: one module per API, each declaring the versions it supports
//! (`VERSIONS`) and its `handle(node, context, request)`. The registry (`crate::api`) lists
//! them; ApiVersions and dispatch are built from it.
//!
//! Handlers decode what they need from the request, call services through the node's routers
//! (`crate::routers`: typed calls to the owning shard), and build the whole response. Error codes come only from `error::error_code`
//! (typed errors from the services), never typed by hand here.
//! References: Kafka protocol guide, one section per API.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_share_group_offsets;
pub mod delete_share_group_state;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_share_group_offsets;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod envelope;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod initialize_share_group_state;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod read_share_group_state;
pub mod read_share_group_state_summary;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
mod share_group_offsets;
mod share_state_api;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_share_group_state;
pub mod write_txn_markers;

use crate::error::{error_code, BrokerError, Result, NONE};
use kafka_protocol::protocol::StrBytes;

/// The `index`th result of a batched metadata change (a short answer means shard 0 failed).
pub(crate) fn nth_result(results: &[Result<()>], index: usize) -> (i16, Option<StrBytes>) {
    match results.get(index).or(results.first()) {
        Some(Ok(())) => (NONE, None),
        Some(Err(error)) => error_fields(error),
        None => error_fields(&BrokerError::MetadataUnavailable("no answer".into())),
    }
}

/// (error_code, error_message) for a response.
pub(crate) fn error_fields(error: &BrokerError) -> (i16, Option<StrBytes>) {
    (error_code(error), Some(StrBytes::from_string(error.to_string())))
}

pub(crate) fn str_bytes(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}
