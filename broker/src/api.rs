//! The API registry: one table lists every Kafka API strata serves with its handler module;
//! each handler module declares its version range (`VERSIONS`) and its `handle`. Both
//! ApiVersions (`SUPPORTED`) and dispatch (`dispatch`) are generated from that one table, so an
//! API cannot be advertised without a handler or handled without being advertised.
//! Every handler has the same shape: `handle(node, context, request) -> response` (Produce
//! returns `Option`, `None` for acks=0; ApiVersions also receives the registry's table).
//! References: Redpanda `kafka/server/handlers/handlers.h`; Kafka protocol guide, "ApiVersions".

use crate::handlers;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use shard::io::Storage;

macro_rules! api_registry {
    (@answer optional $module:ident $node:ident $context:ident $request:ident) => {
        handlers::$module::handle($node, $context, $request).await.map(ResponseKind::from)
    };
    // ApiVersions answers with the registry itself, which its module cannot import.
    (@answer registry $module:ident $node:ident $context:ident $request:ident) => {
        Some(ResponseKind::from(
            handlers::$module::handle($node, $context, $request, SUPPORTED).await,
        ))
    };
    (@answer $module:ident $node:ident $context:ident $request:ident) => {
        Some(ResponseKind::from(handlers::$module::handle($node, $context, $request).await))
    };
    ($( $key:ident => $module:ident $( ($answer:ident) )? ),* $(,)?) => {
        /// (API, min version, max version) for every API strata serves.
        pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
            $( (ApiKey::$key, handlers::$module::VERSIONS.0, handlers::$module::VERSIONS.1), )*
        ];

        /// Runs the handler for a decoded request. `None`: no response is sent (acks=0).
        pub async fn dispatch<S: Storage>(
            node: &Node<S>,
            context: &RequestContext,
            request: RequestKind,
        ) -> Option<ResponseKind> {
            match request {
                $( RequestKind::$key(request) => {
                    api_registry!(@answer $($answer)? $module node context request)
                } )*
                _ => None,
            }
        }
    };
}

api_registry! {
    Produce => produce (optional),
    Fetch => fetch,
    ListOffsets => list_offsets,
    Metadata => metadata,
    OffsetCommit => offset_commit,
    OffsetFetch => offset_fetch,
    FindCoordinator => find_coordinator,
    JoinGroup => join_group,
    Heartbeat => heartbeat,
    LeaveGroup => leave_group,
    SyncGroup => sync_group,
    DescribeGroups => describe_groups,
    ListGroups => list_groups,
    SaslHandshake => sasl_handshake,
    ApiVersions => api_versions (registry),
    CreateTopics => create_topics,
    DeleteTopics => delete_topics,
    DeleteRecords => delete_records,
    InitProducerId => init_producer_id,
    AddPartitionsToTxn => add_partitions_to_txn,
    AddOffsetsToTxn => add_offsets_to_txn,
    EndTxn => end_txn,
    WriteTxnMarkers => write_txn_markers,
    TxnOffsetCommit => txn_offset_commit,
    DescribeConfigs => describe_configs,
    AlterConfigs => alter_configs,
    DescribeLogDirs => describe_log_dirs,
    SaslAuthenticate => sasl_authenticate,
    CreatePartitions => create_partitions,
    DeleteGroups => delete_groups,
    IncrementalAlterConfigs => incremental_alter_configs,
    OffsetDelete => offset_delete,
    DescribeCluster => describe_cluster,
    DescribeProducers => describe_producers,
    DescribeTransactions => describe_transactions,
    ListTransactions => list_transactions,
    DescribeQuorum => describe_quorum,
    OffsetForLeaderEpoch => offset_for_leader_epoch,
    ElectLeaders => elect_leaders,
    AlterPartitionReassignments => alter_partition_reassignments,
    ListPartitionReassignments => list_partition_reassignments,
    DescribeUserScramCredentials => describe_user_scram_credentials,
    AlterUserScramCredentials => alter_user_scram_credentials,
    DescribeClientQuotas => describe_client_quotas,
    AlterClientQuotas => alter_client_quotas,
    DescribeAcls => describe_acls,
    CreateAcls => create_acls,
    DeleteAcls => delete_acls,
}

/// Whether `version` of `api_key` is served.
pub fn supports(api_key: ApiKey, version: i16) -> bool {
    SUPPORTED.iter().any(|&(key, min, max)| key == api_key && (min..=max).contains(&version))
}

/// Raises a response's `throttle_time_ms` to at least `ms` (a request-time quota's throttle,
/// reported as Kafka reports the larger of its byte-rate and request-time throttles).
pub fn raise_throttle(response: &mut ResponseKind, ms: i32) {
    macro_rules! raise {
        ($($kind:ident),* $(,)?) => {
            match response {
                $( ResponseKind::$kind(r) => r.throttle_time_ms = r.throttle_time_ms.max(ms), )*
                _ => {}
            }
        };
    }
    raise!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        DescribeGroups,
        ListGroups,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        DescribeConfigs,
        AlterConfigs,
        DescribeLogDirs,
        CreatePartitions,
        DeleteGroups,
        IncrementalAlterConfigs,
        OffsetDelete,
        DescribeCluster,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        OffsetForLeaderEpoch,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
    );
}
